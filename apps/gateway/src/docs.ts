import { buildOpenApiDocument, renderReferencePage } from '@pm/openapi'
import type { Service } from '@pm/kit'

/** The routes the gateway answers itself under /api/: not in the proxy table, no credential. */
const DOCS_PATHS = new Set(['/api/v1/openapi.json', '/api/v1/docs'])

export function isDocsRoute(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && DOCS_PATHS.has(path)
}

/**
 * Serves the OpenAPI document of the public surface and its reference page. Both are built
 * once, at start-up, from the route catalogue in @pm/contracts.
 */
export function docsRoutes(app: Service): void {
  const doc = buildOpenApiDocument()
  const json = JSON.stringify(doc)
  const html = renderReferencePage(doc)
  app.get('/api/v1/openapi.json', async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300').type('application/json; charset=utf-8')
    return json
  })
  app.get('/api/v1/docs', async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300').type('text/html; charset=utf-8')
    return html
  })
}
