import cors from '@fastify/cors'
import type { Service } from '@pm/kit'

/** Response headers a browser client may read (the request id and the rate-limit state). */
const EXPOSED = ['x-request-id', 'ratelimit', 'ratelimit-policy', 'retry-after']

/** CORS_ORIGINS: comma-separated origins (scheme://host[:port]); empty means none. */
export function parseCorsOrigins(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim().replace(/\/$/, ''))
    .filter(Boolean)
}

/**
 * Browser clients on the listed origins only. An origin not on the list gets no CORS headers at
 * all (no Access-Control-Allow-Credentials either) and its preflight falls through to the
 * gateway's 404; a listed origin's preflight is answered here, before credentials, routing or
 * limits are looked at. Registered before the gateway's own hooks. With no origins, nothing is
 * registered: no CORS header is ever sent.
 */
export async function registerCors(app: Service, origins: string[]): Promise<void> {
  if (origins.length === 0) return
  const allowed = new Set(origins)
  await app.register(cors, {
    origin: (origin, cb) => cb(null, origin !== undefined && allowed.has(origin) ? origin : false),
    credentials: true,
    methods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    // x-csrf-protection: a cookie-mode refresh or logout needs it (identity refuses one without);
    // x-subject-id: the subject of a split's sticky pick.
    allowedHeaders: ['authorization', 'content-type', 'x-request-id', 'x-csrf-protection', 'x-subject-id'],
    exposedHeaders: EXPOSED,
    maxAge: 600,
    strictPreflight: true,
  })
}
