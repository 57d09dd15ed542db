import { isRouteErrorResponse, useRouteError } from 'react-router'

export interface RouteErrorText {
  title: string
  message: string
  /** The page's code could not be fetched (a redeploy renamed it, or the service is down). */
  chunk: boolean
}

// What browsers and Vite say when a lazily loaded file cannot be fetched: Chrome, Firefox,
// Safari's failed import(), then Vite's preload of the page's CSS.
const CHUNK_ERROR =
  /failed to fetch dynamically imported module|error loading dynamically imported module|importing a module script failed|unable to preload css/i

/** The title and sentence the error page shows for what a route threw. */
export function describeRouteError(error: unknown): RouteErrorText {
  if (isRouteErrorResponse(error)) {
    if (error.status === 404) {
      return { title: 'Page not found', message: 'There is no page at this address.', chunk: false }
    }
    return {
      title: 'This page could not be opened',
      message: `${error.status} ${error.statusText}`,
      chunk: false,
    }
  }
  const message = error instanceof Error ? error.message : String(error)
  if (CHUNK_ERROR.test(message)) {
    return {
      title: 'This page could not be loaded',
      message:
        'The dashboard was updated since this tab opened, or the service cannot be reached. Reload to get the current version.',
      chunk: true,
    }
  }
  return {
    title: 'Something went wrong',
    message: `This page failed to show: ${message}. Reloading may help.`,
    chunk: false,
  }
}

/**
 * A route's error element: a plain message and a Reload button instead of React Router's raw
 * error page. Under the signed-in frame (`framed`) it fills the page's place and the navigation
 * stays; at the root it is a page of its own.
 */
export function RouteError({ framed = false }: { framed?: boolean }) {
  const text = describeRouteError(useRouteError())
  const body = (
    <div className="empty route-error" role="alert">
      <h1>{text.title}</h1>
      <p>{text.message}</p>
      <div className="actions">
        <button type="button" className="btn btn-primary" onClick={() => window.location.reload()}>
          Reload
        </button>
        <a className="btn" href="/prompts">
          Back to the prompts
        </a>
      </div>
    </div>
  )
  if (framed) return body
  return (
    <main id="main" className="page center">
      {body}
    </main>
  )
}
