import { HealthStatus, HttpClientError, OpenApiDocumentBody } from '../api/index.ts'
import type { RouteSpec } from './spec.ts'

/**
 * The probes' only refusal: the HTTP server's, for a request it cannot read (they need no
 * credential, no HTTPS and take no input).
 */
const UNREADABLE_REQUEST = {
  400: {
    description:
      'The HTTP server could not read the request (malformed request line or headers; 431 for headers too large)',
    schema: HttpClientError,
  },
} as const

/** Routes the gateway answers itself: this document, its page, health. */
export const META_ROUTES = {
  // ---- served by the gateway itself

  getOpenApiDocument: {
    method: 'GET',
    path: '/api/v1/openapi.json',
    tag: 'meta',
    summary: 'This OpenAPI 3.1 document',
    auth: 'public',
    status: 200,
    response: OpenApiDocumentBody,
    envelope: false,
    gateway: true,
  },
  getApiReference: {
    method: 'GET',
    path: '/api/v1/docs',
    tag: 'meta',
    summary: 'A browsable reference page of this document',
    auth: 'public',
    status: 200,
    envelope: false,
    produces: 'text/html',
    gateway: true,
  },
  getLiveness: {
    method: 'GET',
    path: '/health/live',
    tag: 'meta',
    summary: 'Liveness probe',
    auth: 'public',
    status: 200,
    response: HealthStatus,
    envelope: false,
    gateway: true,
    otherResponses: UNREADABLE_REQUEST,
  },
  getReadiness: {
    method: 'GET',
    path: '/health/ready',
    tag: 'meta',
    summary: 'Readiness probe (checks the upstream services)',
    auth: 'public',
    status: 200,
    response: HealthStatus,
    envelope: false,
    gateway: true,
    otherResponses: {
      ...UNREADABLE_REQUEST,
      503: { description: 'An upstream is not ready', schema: HealthStatus },
    },
  },
} as const satisfies Record<string, RouteSpec>
