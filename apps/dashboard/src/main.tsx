import './styles.css'
import { PromptServiceError } from '@pm/client'
import { MutationCache, QueryCache, QueryClient, QueryClientProvider } from '@tanstack/react-query'
import { StrictMode } from 'react'
import { createRoot } from 'react-dom/client'
import { RouterProvider } from 'react-router/dom'
import { router } from './router.tsx'
import { session } from './session.ts'

/** An expired access token (a laptop that slept past the timer): renew it, then ask again. */
function onAuthError(error: unknown): void {
  if (
    error instanceof PromptServiceError &&
    error.status === 401 &&
    session.getState().status === 'signed-in'
  ) {
    session.refresh().then(
      () => queryClient.invalidateQueries(),
      () => {},
    )
  }
}

const queryClient = new QueryClient({
  queryCache: new QueryCache({ onError: onAuthError }),
  mutationCache: new MutationCache({ onError: onAuthError }),
  defaultOptions: {
    queries: {
      staleTime: 10_000,
      refetchOnWindowFocus: false,
      retry: (count, error) =>
        count < 2 && !(error instanceof PromptServiceError && error.status > 0 && error.status < 500),
    },
  },
})
session.onIdentityChange = () => queryClient.clear()
session.start()

const root = document.getElementById('root')
if (root) {
  createRoot(root).render(
    <StrictMode>
      <QueryClientProvider client={queryClient}>
        <RouterProvider router={router} />
      </QueryClientProvider>
    </StrictMode>,
  )
}
