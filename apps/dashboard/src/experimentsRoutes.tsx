import type { RouteObject } from 'react-router'

/** Datasets and experiments (DESIGN section 14), each page loaded when first opened. */
export const experimentRoutes: RouteObject[] = [
  {
    path: 'datasets',
    lazy: async () => ({ Component: (await import('./pages/experiments/Datasets.tsx')).Datasets }),
  },
  {
    path: 'datasets/:id',
    lazy: async () => ({ Component: (await import('./pages/experiments/Dataset.tsx')).Dataset }),
  },
  {
    path: 'experiments/:id',
    lazy: async () => ({ Component: (await import('./pages/experiments/Results.tsx')).Results }),
  },
]

/** The prompt tab "Experiments" (under prompts/:id). */
export const promptExperimentRoute: RouteObject = {
  path: 'experiments',
  lazy: async () => ({ Component: (await import('./pages/experiments/Compare.tsx')).Compare }),
}
