import { randomBytes } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join, sep } from 'node:path'
import { fileURLToPath } from 'node:url'
import fastifyStatic from '@fastify/static'
import { AppError } from '@pm/contracts'
import type { Service } from '@pm/kit'
import type { FastifyReply } from 'fastify'

/** What index.html carries for the per-response style nonce (apps/dashboard/index.html). */
export const NONCE_SLOT = '__CSP_NONCE__'

/**
 * The dashboard's Content-Security-Policy: scripts, styles and requests from this origin only;
 * no inline script, no framing, no plugins. The one exception is a per-response nonce for
 * styles: CodeMirror writes its theme into a <style> element that carries it.
 */
export function dashboardCsp(nonce: string): string {
  return [
    "default-src 'none'",
    "script-src 'self'",
    `style-src 'self' 'nonce-${nonce}'`,
    "img-src 'self' data:",
    "font-src 'self'",
    "connect-src 'self'",
    "manifest-src 'self'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
  ].join('; ')
}

const IMMUTABLE = 'public, max-age=31536000, immutable'
const SECURITY_HEADERS = {
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
}

/** The built dashboard: DASHBOARD_DIR, else the dist/ of the @pm/dashboard package. */
export function dashboardDir(configured: string | undefined): string | undefined {
  if (configured) return configured
  try {
    return join(dirname(fileURLToPath(import.meta.resolve('@pm/dashboard/package.json'))), 'dist')
  } catch {
    return undefined
  }
}

/**
 * Paths the SPA never answers: the API and the probes keep their JSON 404, and so does /metrics
 * (served only on METRICS_PORT; a scrape sent to the public port must see a 404, not the page).
 */
function isServicePath(path: string): boolean {
  return (
    path === '/api' ||
    path.startsWith('/api/') ||
    path === '/health' ||
    path.startsWith('/health/') ||
    path === '/metrics' ||
    path.startsWith('/metrics/')
  )
}

/**
 * Serves the dashboard at `/` (DESIGN section 10): hashed assets cached for a year, the page
 * never cached and answered for any GET outside /api, /health and /metrics (the app's router takes it
 * from there). Without a built dashboard nothing is registered.
 */
export async function dashboardRoutes(app: Service, dir: string | undefined): Promise<boolean> {
  const indexFile = dir ? join(dir, 'index.html') : undefined
  if (!dir || !indexFile || !existsSync(indexFile)) {
    app.log.warn({ dir }, 'no built dashboard found: / is not served (pnpm --filter @pm/dashboard build)')
    return false
  }
  const page = readFileSync(indexFile, 'utf8')
  const assets = join(dir, 'assets') + sep

  const sendPage = (reply: FastifyReply) => {
    const nonce = randomBytes(16).toString('base64')
    return reply
      .headers({
        ...SECURITY_HEADERS,
        'content-security-policy': dashboardCsp(nonce),
        'cache-control': 'no-store',
        'content-type': 'text/html; charset=utf-8',
      })
      .send(page.replaceAll(NONCE_SLOT, nonce))
  }

  await app.register(fastifyStatic, {
    root: dir,
    prefix: '/',
    // One route per built file, found at start; the page itself is answered below.
    wildcard: false,
    index: false,
    allowedPath: (path) => path !== '/index.html',
    cacheControl: false,
    setHeaders: (reply, path) => {
      reply.headers({
        ...SECURITY_HEADERS,
        'content-security-policy': dashboardCsp('none'),
        'cache-control': path.startsWith(assets) ? IMMUTABLE : 'no-cache',
      })
    },
  })
  app.get('/', { config: { auth: 'none' } }, async (_request, reply) => sendPage(reply))
  app.get('/*', { config: { auth: 'none' } }, async (request, reply) => {
    const path = request.url.split('?', 1)[0] ?? ''
    // A missing hashed asset is a 404, not the page (it would be cached as JavaScript).
    if (isServicePath(path) || path.startsWith('/assets/'))
      throw new AppError('NOT_FOUND', `route ${request.method} ${path} not found`)
    return sendPage(reply)
  })
  return true
}
