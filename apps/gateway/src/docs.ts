import { readFile } from 'node:fs/promises'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { gzip } from 'node:zlib'
import { AppError } from '@pm/contracts'
import type { Service } from '@pm/kit'
import { buildOpenApiDocument } from '@pm/openapi'
import type { FastifyReply, FastifyRequest } from 'fastify'

/** The routes the gateway answers itself under /api/: not in the proxy table, no credential. */
const DOCS_PATHS = new Set(['/api/v1/openapi.json', '/api/v1/docs'])

export function isDocsRoute(method: string, path: string): boolean {
  return (method === 'GET' || method === 'HEAD') && DOCS_PATHS.has(path)
}

/**
 * The reference page's renderer: Scalar's standalone bundle from the gateway's own install
 * (`@scalar/api-reference`, dist/browser/standalone.js), served from here, never from a CDN.
 * Its folder, or undefined where the package cannot be found (a build bundled without
 * node_modules, such as the benchmarks' on a machine without Node packages): the gateway then
 * starts all the same, without the reference page.
 */
export function scalarDir(
  resolve: (specifier: string) => string = (specifier) => import.meta.resolve(specifier),
): string | undefined {
  try {
    return dirname(dirname(fileURLToPath(resolve('@scalar/api-reference'))))
  } catch {
    return undefined
  }
}

/** Where the page's two scripts are served: outside /api (they are files, not API routes). */
export const DOCS_ASSETS = '/api-docs'

/**
 * The page's settings for Scalar, in a script file of our own (no inline script under the CSP).
 * Try-it sends requests to this origin and nothing else: the servers list is this origin, no
 * request proxy, no telemetry, no fonts from Scalar's CDN, no agent chat, no MCP.
 */
const INIT_SCRIPT = `'use strict'
Scalar.createApiReference('#app', {
  url: '/api/v1/openapi.json',
  servers: [{ url: window.location.origin, description: 'This server' }],
  baseServerURL: window.location.origin,
  proxyUrl: '',
  telemetry: false,
  withDefaultFonts: false,
  agent: { disabled: true },
  mcp: { disabled: true },
  showDeveloperTools: 'never',
  hideClientButton: false,
  persistAuth: false,
  documentDownloadType: 'json',
})
`

/**
 * The reference page's Content-Security-Policy: scripts and requests from this origin only (so
 * try-it cannot reach another one, whatever is typed into it); styles inline too, since the
 * renderer writes its theme into <style> elements and style attributes.
 */
export function docsCsp(): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    "style-src 'self' 'unsafe-inline'",
    "img-src 'self' data: blob:",
    "font-src 'self' data:",
    "connect-src 'self'",
    "worker-src 'self' blob:",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ')
}

const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
}

/** A file answered as is, or gzipped (made once, on first use) when the client takes gzip. */
function staticFile(load: () => Promise<Buffer>, type: string, cacheControl: string) {
  let plain: Promise<Buffer> | undefined
  let zipped: Promise<Buffer> | undefined
  return async (request: FastifyRequest, reply: FastifyReply) => {
    plain ??= load()
    reply.headers({ ...SECURITY_HEADERS, 'cache-control': cacheControl, vary: 'accept-encoding' }).type(type)
    if (/\bgzip\b/.test(String(request.headers['accept-encoding'] ?? ''))) {
      zipped ??= plain.then((body) => promisify(gzip)(body))
      reply.header('content-encoding', 'gzip')
      return zipped
    }
    return plain
  }
}

/**
 * Serves the OpenAPI document of the public surface and its reference page. The document is
 * built once, on its first request, from the route catalogue in @pm/contracts (at start-up it
 * cost every gateway and embedded default about 0.1 s of CPU that most never use; the
 * openapi package's tests build it on every run); the page is Scalar's renderer reading it
 * (try-it included), its bundle read from disk on first use.
 */
export async function docsRoutes(app: Service, scalar: string | undefined): Promise<void> {
  let built: { json: string; title: string } | undefined
  const documentOnce = () => {
    if (!built) {
      const doc = buildOpenApiDocument()
      built = { json: JSON.stringify(doc), title: doc.info.title }
    }
    return built
  }
  app.get('/api/v1/openapi.json', async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300').type('application/json; charset=utf-8')
    return documentOnce().json
  })
  if (scalar === undefined) {
    app.log.warn('@scalar/api-reference not found: GET /api/v1/docs answers 404 (the document is served)')
    app.get('/api/v1/docs', async () => {
      throw new AppError(
        'NOT_FOUND',
        'the API reference page is not installed here (@scalar/api-reference); the document is at /api/v1/openapi.json',
      )
    })
    return
  }
  const scalarBundle = join(scalar, 'dist', 'browser', 'standalone.js')
  const version = (JSON.parse(await readFile(join(scalar, 'package.json'), 'utf8')) as { version: string })
    .version
  // The bundle's name carries its version: cached for a year, a new version gets a new name.
  const bundlePath = `${DOCS_ASSETS}/scalar-${version}.js`
  const initPath = `${DOCS_ASSETS}/init.js`
  const page = (title: string) => `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" href="data:,">
<title>${title.replace(/[<>&"]/g, '')} — API reference</title>
</head>
<body>
<noscript>This page needs JavaScript. The OpenAPI document is at <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>.</noscript>
<div id="app"></div>
<script src="${bundlePath}"></script>
<script src="${initPath}"></script>
</body>
</html>
`
  app.get('/api/v1/docs', async (_request, reply) => {
    reply
      .headers({ ...SECURITY_HEADERS, 'content-security-policy': docsCsp(), 'cache-control': 'no-cache' })
      .type('text/html; charset=utf-8')
    return page(documentOnce().title)
  })
  const javascript = 'text/javascript; charset=utf-8'
  app.get(
    bundlePath,
    staticFile(() => readFile(scalarBundle), javascript, 'public, max-age=31536000, immutable'),
  )
  app.get(
    initPath,
    staticFile(async () => Buffer.from(INIT_SCRIPT), javascript, 'no-cache'),
  )
}
