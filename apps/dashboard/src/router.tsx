import { createBrowserRouter, Navigate } from 'react-router'
import { Shell } from './Shell.tsx'
import { PromptList } from './pages/PromptList.tsx'
import { SignIn, SignUp } from './pages/SignIn.tsx'
import { publicRoutes, workspaceRoutes } from './settingsAndCatalogRoutes.tsx'
import { experimentRoutes, promptExperimentRoute } from './experimentsRoutes.tsx'

/**
 * The routes. The sign-in page and the prompts list are in the first bundle; a prompt's pages
 * (and CodeMirror) load when first opened.
 */
export const router = createBrowserRouter([
  { path: '/sign-in', element: <SignIn /> },
  ...publicRoutes,
  { path: '/sign-up', element: <SignUp /> },
  {
    element: <Shell />,
    children: [
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
    ],
  },
])

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
