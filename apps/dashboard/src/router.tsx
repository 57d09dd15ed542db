import { createBrowserRouter, Navigate, type RouteObject } from 'react-router'
import { RouteError } from './RouteError.tsx'
import { Shell } from './Shell.tsx'
import { PromptList } from './pages/PromptList.tsx'
import { SignIn, SignUp } from './pages/SignIn.tsx'
import { publicRoutes, workspaceRoutes } from './settingsAndCatalogRoutes.tsx'
import { experimentRoutes, promptExperimentRoute } from './experimentsRoutes.tsx'

/**
 * The routes. The sign-in page and the prompts list are in the first bundle; a prompt's pages
 * (and CodeMirror) load when first opened. A page that fails (its file gone after a redeploy, say)
 * shows RouteError: inside the signed-in frame, so the navigation stays, else as a page of its own.
 */
export const router = createBrowserRouter([
  {
    errorElement: <RouteError />,
    children: [
      { path: '/sign-in', element: <SignIn /> },
      ...publicRoutes,
      { path: '/sign-up', element: <SignUp /> },
      {
        element: <Shell />,
        children: [{ errorElement: <RouteError framed />, children: signedInRoutes() }],
      },
    ],
  },
])

/** The pages inside the signed-in frame. */
function signedInRoutes(): RouteObject[] {
  return [
    { index: true, element: <Navigate to="/prompts" replace /> },
    { path: 'prompts', element: <PromptList /> },
    {
      path: 'prompts/new',
      lazy: async () => ({ Component: (await import('./pages/NewPrompt.tsx')).NewPrompt }),
    },
    {
      path: 'prompts/:id',
      lazy: async () => ({ Component: (await import('./pages/PromptLayout.tsx')).PromptLayout }),
      children: [
        { index: true, lazy: async () => ({ Component: (await import('./pages/Editor.tsx')).Editor }) },
        {
          path: 'preview',
          lazy: async () => ({ Component: (await import('./pages/Preview.tsx')).Preview }),
        },
        {
          path: 'history',
          lazy: async () => ({ Component: (await import('./pages/History.tsx')).History }),
        },
        {
          path: 'playground',
          lazy: async () => ({ Component: (await import('./pages/Playground.tsx')).Playground }),
        },
        {
          path: 'environments',
          lazy: async () => ({ Component: (await import('./pages/Environments.tsx')).Environments }),
        },
        promptExperimentRoute,
        {
          path: 'audit',
          lazy: async () => ({ Component: (await import('./pages/PromptAudit.tsx')).PromptAudit }),
        },
      ],
    },
    ...workspaceRoutes,
    ...experimentRoutes,
    { path: '*', element: <NotFound /> },
  ]
}

function NotFound() {
  return (
    <div className="page">
      <h1>Page not found</h1>
      <p>
        <a href="/prompts">Back to the prompts</a>
      </p>
    </div>
  )
}
