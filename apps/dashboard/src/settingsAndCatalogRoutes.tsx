import type { RouteObject } from 'react-router'

/**
 * The routes of the dashboard's second part, every page loaded when first opened (the first
 * route's JavaScript budget is untouched): the public catalog, which works signed out, and the
 * workspace's settings and CSV import inside the signed-in frame.
 */
export const publicRoutes: RouteObject[] = [
  {
    path: '/catalog',
    lazy: async () => ({ Component: (await import('./pages/catalog/CatalogLayout.tsx')).CatalogLayout }),
    children: [
      {
        index: true,
        lazy: async () => ({ Component: (await import('./pages/catalog/Catalog.tsx')).Catalog }),
      },
      {
        path: ':id',
        lazy: async () => ({ Component: (await import('./pages/catalog/CatalogPrompt.tsx')).CatalogPrompt }),
      },
    ],
  },
]

export const workspaceRoutes: RouteObject[] = [
  { path: 'prompts/import', lazy: async () => ({ Component: (await import('./pages/Import.tsx')).Import }) },
  {
    path: 'settings',
    lazy: async () => ({ Component: (await import('./pages/settings/SettingsLayout.tsx')).SettingsLayout }),
    children: [
      {
        index: true,
        lazy: async () => ({ Component: (await import('./pages/settings/Organization.tsx')).Organization }),
      },
      {
        path: 'members',
        lazy: async () => ({ Component: (await import('./pages/settings/Members.tsx')).Members }),
      },
      {
        path: 'api-keys',
        lazy: async () => ({ Component: (await import('./pages/settings/ApiKeys.tsx')).ApiKeys }),
      },
      {
        path: 'webhooks',
        lazy: async () => ({ Component: (await import('./pages/settings/Webhooks.tsx')).Webhooks }),
      },
      {
        path: 'connections',
        lazy: async () => ({ Component: (await import('./pages/settings/Connections.tsx')).Connections }),
      },
      {
        path: 'audit-log',
        lazy: async () => ({ Component: (await import('./pages/settings/AuditLog.tsx')).AuditLog }),
      },
      {
        path: 'webhooks/:webhookId',
        lazy: async () => ({
          Component: (await import('./pages/settings/WebhookDeliveries.tsx')).WebhookDeliveries,
        }),
      },
    ],
  },
]
