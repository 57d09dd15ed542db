import {
  ALL_SCHEMAS,
  ERROR_STATUS,
  type ErrorCode,
  listRoutes,
  type OperationId,
  ROUTE_TAGS,
  type RouteSpec,
  type RouteTag,
  routeErrors,
} from '@pm/contracts'
import type { TSchema } from '@sinclair/typebox'
import { type ExampleContext, exampleOf } from './examples.ts'
import type { JsonSchema } from './jsonSchema.ts'

/**
 * Turns the route catalogue of `@pm/contracts` into an OpenAPI 3.1 document. Nothing here is
 * written by hand per route: paths, parameters, bodies, envelopes, failures and security all
 * follow from the catalogue and the `$id` schemas.
 */

// In its own file, which examples.ts imports too: no import circle.
export type { JsonSchema } from './jsonSchema.ts'

export interface OpenApiParameter {
  name: string
  in: 'path' | 'query' | 'header'
  required: boolean
  description?: string
  schema: JsonSchema
  example?: unknown
}

export interface OpenApiMedia {
  schema: JsonSchema
  example?: unknown
  encoding?: Record<string, { contentType: string }>
}

export interface OpenApiResponse {
  description: string
  headers?: Record<string, { $ref: string } | { description: string; schema: JsonSchema }>
  content?: Record<string, OpenApiMedia>
}

export interface OpenApiOperation {
  operationId: string
  tags: string[]
  summary: string
  description: string
  parameters?: OpenApiParameter[]
  requestBody?: { required: boolean; content: Record<string, OpenApiMedia> }
  responses: Record<string, OpenApiResponse>
  security: Record<string, string[]>[]
  'x-auth': RouteSpec['auth']
  'x-scope'?: string
  'x-error-codes': ErrorCode[]
}

export type HttpVerb = 'get' | 'post' | 'patch' | 'delete'

export interface OpenApiDocument {
  openapi: '3.1.0'
  jsonSchemaDialect: string
  info: { title: string; version: string; description: string; license: License }
  servers: {
    url: string
    description?: string
    variables?: Record<string, { default: string; enum?: string[]; description?: string }>
  }[]
  tags: { name: string; description: string }[]
  paths: Record<string, Partial<Record<HttpVerb, OpenApiOperation>>>
  webhooks: Record<string, { post: Omit<OpenApiOperation, 'x-auth' | 'x-error-codes'> }>
  components: {
    schemas: Record<string, JsonSchema>
    securitySchemes: Record<string, JsonSchema>
    headers: Record<string, { description: string; schema: JsonSchema }>
  }
}

/** OpenAPI 3.1's License Object: a name and an SPDX identifier (or a URL). */
export interface License {
  name: string
  identifier?: string
  url?: string
}

/**
 * The project grants no licence yet (no LICENSE file, no `license` in its package.json files),
 * so the document says what holds by default: all rights reserved. Replace it here, in one place,
 * when the project picks a licence (docs/decisions.md, issue 31).
 */
export const DOCUMENT_LICENSE: License = {
  name: 'Proprietary: all rights reserved (no licence granted yet)',
  identifier: 'LicenseRef-Proprietary',
}

export interface DocumentOptions {
  /** Absolute base URL to list under `servers` (the gateway's public address); else a templated one. */
  serverUrl?: string
  version?: string
}

const SCHEMA_REF = '#/components/schemas/'
const DIALECT = 'https://spec.openapis.org/oas/3.1/dialect/base'

/** `/api/v1/prompts/:id` → `/api/v1/prompts/{id}`. */
export function toOpenApiPath(path: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, '{$1}')
}

/** A JSON copy of a TypeBox schema with `$ref: 'Name'` pointed at the components. */
function plain(schema: TSchema | JsonSchema): JsonSchema {
  const copy = JSON.parse(JSON.stringify(schema)) as JsonSchema
  const walk = (node: unknown): void => {
    if (Array.isArray(node)) {
      for (const item of node) walk(item)
      return
    }
    if (!node || typeof node !== 'object') return
    const obj = node as JsonSchema
    if (typeof obj.$ref === 'string' && !obj.$ref.startsWith('#')) obj.$ref = `${SCHEMA_REF}${obj.$ref}`
    for (const value of Object.values(obj)) walk(value)
  }
  walk(copy)
  return copy
}

/** A reference for an `$id` schema, the schema itself otherwise. */
function use(schema: TSchema): JsonSchema {
  return typeof schema.$id === 'string' ? { $ref: `${SCHEMA_REF}${schema.$id}` } : plain(schema)
}

function refsIn(node: unknown, out: Set<string>): void {
  if (Array.isArray(node)) {
    for (const item of node) refsIn(item, out)
    return
  }
  if (!node || typeof node !== 'object') return
  const obj = node as JsonSchema
  if (typeof obj.$ref === 'string' && obj.$ref.startsWith(SCHEMA_REF))
    out.add(obj.$ref.slice(SCHEMA_REF.length))
  for (const value of Object.values(obj)) refsIn(value, out)
}

const HEADERS: OpenApiDocument['components']['headers'] = {
  'X-Request-Id': {
    description:
      'The request id (yours when you sent a valid one, else made up). Quote it in support requests.',
    schema: { type: 'string' },
  },
  'X-Service-Version': { description: 'The version number that was rendered.', schema: { type: 'string' } },
  'Retry-After': { description: 'Seconds to wait before trying again.', schema: { type: 'integer' } },
  'X-Prompt-Revision': {
    description: "The draft's revision when the file was made (an import's `expect`).",
    schema: { type: 'string' },
  },
  'Content-Disposition': {
    description: 'attachment, naming the file (`<slug>.<ext>`).',
    schema: { type: 'string' },
  },
  RateLimit: {
    description: 'Remaining quota of the current window (IETF httpapi RateLimit header draft).',
    schema: { type: 'string' },
  },
  'RateLimit-Policy': {
    description: 'The quota policy (IETF httpapi RateLimit header draft).',
    schema: { type: 'string' },
  },
}

const headerRef = (name: keyof typeof HEADERS) => ({ $ref: `#/components/headers/${name}` })

function parameters(route: RouteSpec): OpenApiParameter[] {
  const out: OpenApiParameter[] = []
  const add = (schema: TSchema | undefined, where: 'path' | 'query' | 'header') => {
    if (!schema) return
    const obj = plain(schema)
    const props = (obj.properties ?? {}) as Record<string, JsonSchema>
    const required = new Set((obj.required ?? []) as string[])
    for (const [name, prop] of Object.entries(props)) {
      const { description, ...rest } = prop
      out.push({
        name,
        in: where,
        required: where === 'path' || (required.has(name) && rest.default === undefined),
        ...(typeof description === 'string' ? { description } : {}),
        schema: rest,
      })
    }
  }
  add(route.params, 'path')
  add(route.query, 'query')
  add(route.requestHeaders, 'header')
  return out
}

function envelope(schema: JsonSchema): JsonSchema {
  return { type: 'object', properties: { data: schema }, required: ['data'], additionalProperties: false }
}

function successResponse(route: RouteSpec): OpenApiResponse {
  const headers: NonNullable<OpenApiResponse['headers']> = { 'X-Request-Id': headerRef('X-Request-Id') }
  for (const name of route.headers ?? []) headers[name] = headerRef(name)
  if (!route.gateway && route.auth !== 'user') {
    headers.RateLimit = headerRef('RateLimit')
    headers['RateLimit-Policy'] = headerRef('RateLimit-Policy')
  }
  const description =
    route.status === 204 ? 'Done; no content.' : route.status === 202 ? 'Accepted.' : 'Success.'
  if (route.produces === 'text/html' || route.produces === 'text/plain') {
    const content: Record<string, { schema: JsonSchema }> = {
      [route.produces]: { schema: { type: 'string' } },
    }
    for (const type of route.producesAlso ?? []) content[type] = { schema: { type: 'object' } }
    return { description, headers, content }
  }
  if (route.produces === 'application/gzip') {
    return {
      description,
      headers,
      content: { 'application/gzip': { schema: { type: 'string', format: 'binary' } } },
    }
  }
  if (route.produces === 'text/csv') {
    const text = { schema: { type: 'string' } }
    return { description, headers, content: { 'text/csv': text, 'application/x-ndjson': text } }
  }
  if (!route.response) return { description, headers }
  const payload = use(route.response)
  return {
    description,
    headers,
    content: { 'application/json': { schema: route.envelope === false ? payload : envelope(payload) } },
  }
}

function errorResponses(route: RouteSpec): Record<string, OpenApiResponse> {
  const byStatus = new Map<number, ErrorCode[]>()
  for (const code of routeErrors(route)) {
    const status = ERROR_STATUS[code]
    byStatus.set(status, [...(byStatus.get(status) ?? []), code])
  }
  const out: Record<string, OpenApiResponse> = {}
  for (const [status, codes] of [...byStatus].sort((a, b) => a[0] - b[0])) {
    const headers: NonNullable<OpenApiResponse['headers']> = { 'X-Request-Id': headerRef('X-Request-Id') }
    if (status === 429) {
      headers['Retry-After'] = headerRef('Retry-After')
      headers.RateLimit = headerRef('RateLimit')
      headers['RateLimit-Policy'] = headerRef('RateLimit-Policy')
    }
    out[String(status)] = {
      description: codes.join(', '),
      headers,
      content: {
        'application/json': {
          schema: {
            allOf: [
              { $ref: `${SCHEMA_REF}ErrorBody` },
              // Narrows `code` only; the rest of the body is ErrorBody's. (additionalProperties
              // says so outright: example checkers such as Redocly's otherwise close this part.)
              {
                type: 'object',
                properties: {
                  error: {
                    type: 'object',
                    properties: { code: { enum: codes } },
                    additionalProperties: true,
                  },
                },
                additionalProperties: true,
              },
            ],
          },
        },
      },
    }
  }
  return out
}

function security(route: RouteSpec): Record<string, string[]>[] {
  const scopes = route.scope ? [route.scope] : []
  if (route.auth === 'public') return []
  if (route.auth === 'user') return [{ userToken: scopes }]
  return [{ apiKey: scopes }, { userToken: scopes }]
}

function credentialText(route: RouteSpec): string {
  if (route.auth === 'public') return 'No credential needed.'
  const scope = route.scope ? ` with the \`${route.scope}\` scope` : ''
  if (route.auth === 'user') {
    return `Needs a user access token${scope ? ` whose role grants the \`${route.scope}\` scope` : ''}; an API key is refused (403 USER_TOKEN_REQUIRED).`
  }
  return `An API key${scope}, or a user access token${scope ? ' whose role grants it' : ''}.`
}

function operation(route: RouteSpec & { operationId: OperationId }): OpenApiOperation {
  const op: OpenApiOperation = {
    operationId: route.operationId,
    tags: [route.tag],
    summary: route.summary,
    description: [route.description, credentialText(route)].filter(Boolean).join('\n\n'),
    responses: {
      [String(route.status)]: successResponse(route),
      ...Object.fromEntries(
        Object.entries(route.otherResponses ?? {}).map(([status, r]) => [
          status,
          {
            description: r.description,
            headers: { 'X-Request-Id': headerRef('X-Request-Id') },
            content: { 'application/json': { schema: use(r.schema) } },
          },
        ]),
      ),
      ...errorResponses(route),
    },
    security: security(route),
    'x-auth': route.auth,
    ...(route.scope ? { 'x-scope': route.scope } : {}),
    'x-error-codes': routeErrors(route),
  }
  const params = parameters(route)
  if (params.length > 0) op.parameters = params
  if (route.body) {
    op.requestBody =
      route.bodyType === 'multipart'
        ? {
            required: true,
            content: {
              'multipart/form-data': {
                schema: use(route.body),
                encoding: { file: { contentType: 'text/csv' } },
              },
            },
          }
        : {
            required: route.bodyOptional !== true,
            content: { 'application/json': { schema: use(route.body) } },
          }
  }
  return op
}

/** The event kinds a subscription can choose, each with its payload schema and a summary. */
const WEBHOOK_EVENTS: Array<{ type: string; operationId: string; schema: string; summary: string }> = [
  {
    type: 'version.published',
    operationId: 'versionPublishedWebhook',
    schema: 'VersionPublishedEvent',
    summary: 'A version was published',
  },
  {
    type: 'environment.promoted',
    operationId: 'environmentPromotedWebhook',
    schema: 'EnvironmentPromotedEvent',
    summary: 'A version was pinned to preview or production',
  },
  {
    type: 'prompt.visibility.changed',
    operationId: 'promptVisibilityChangedWebhook',
    schema: 'PromptVisibilityChangedEvent',
    summary: 'A prompt entered or left the public catalog',
  },
  {
    type: 'prompt.deleted',
    operationId: 'promptDeletedWebhook',
    schema: 'PromptDeletedEvent',
    summary: 'A prompt was deleted',
  },
]

function webhooks(): OpenApiDocument['webhooks'] {
  const header = (name: string, description: string): OpenApiParameter => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
  })
  const entries = WEBHOOK_EVENTS.map(({ type, operationId, schema, summary }) => [
    type,
    {
      post: {
        operationId,
        tags: ['webhooks'],
        summary,
        description:
          `Sent to every active subscription of the organization whose \`events\` include \`${type}\` ` +
          '(a subscription that names none gets `version.published` only). 2xx is success; anything ' +
          'else, or no answer within 15 s, is retried with backoff for about 3 days; 410 turns the ' +
          'subscription off. Verify `X-Service-Signature` (HMAC-SHA256 of `<t>.<raw body>` with ' +
          'the secret) or the Standard Webhooks headers with any Standard Webhooks library.',
        parameters: [
          header('X-Service-Signature', '`t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`'),
          header('X-Service-Event', `The event type: \`${type}\`.`),
          header('X-Service-Delivery', 'Unique id of this delivery (the same across its attempts).'),
          header('webhook-id', 'Standard Webhooks: the event id.'),
          header('webhook-timestamp', 'Standard Webhooks: unix seconds.'),
          header(
            'webhook-signature',
            'Standard Webhooks: `v1,<base64 HMAC-SHA256 of "<id>.<t>.<raw body>">`.',
          ),
        ],
        requestBody: {
          required: true,
          content: { 'application/json': { schema: { $ref: `${SCHEMA_REF}${schema}` } } },
        },
        responses: {
          '2XX': { description: 'Received.' },
          '410': { description: 'Gone: the subscription is turned off.' },
        },
        // The service calls you: no credential of this API, the signature headers instead.
        security: [],
      },
    },
  ])
  return Object.fromEntries(entries) as OpenApiDocument['webhooks']
}

const INFO_DESCRIPTION = `Prompt templates with immutable numbered versions, environments, rendering, a public catalog and webhooks.

**Credentials.** Send \`Authorization: Bearer <credential>\`: an API key (\`pk_...\`, for backends and scripts; it belongs to one organization) or a user access token (a JWT from \`POST /api/v1/auth/login\`; it picks an organization with \`organizationId\` in the query or body, else the token's own). Publishing, forking, CSV import and key management need a user token.

**Envelope.** A success is \`{"data": <payload>}\`. A failure is \`{"error": {"code", "message", "details"?, "requestId"}}\`; \`code\` is one of a closed list (see ErrorBody) and is what to branch on.

**Pagination.** \`page\` from 1, \`limit\` default 20, at most 100; lists answer \`pagination: {page, limit, total, totalPages, hasNextPage}\`.

**Rate limits.** Per API key and per IP on sign-in and the public catalog: 429 RATE_LIMITED with \`Retry-After\`.`

/** A request and a response example for an operation, made from its schemas. */
function addExamples(
  op: Pick<OpenApiOperation, 'parameters' | 'requestBody' | 'responses'>,
  ctx: ExampleContext,
) {
  for (const param of op.parameters ?? []) param.example = exampleOf(param.schema, ctx, param.name)
  for (const media of Object.values(op.requestBody?.content ?? {}))
    media.example = exampleOf(media.schema, ctx)
  for (const response of Object.values(op.responses)) {
    for (const [type, media] of Object.entries(response.content ?? {})) {
      if (type === 'application/json') media.example = exampleOf(media.schema, ctx)
    }
  }
}

/** Builds the whole document from the route catalogue and the `$id` schemas. */
export function buildOpenApiDocument(options: DocumentOptions = {}): OpenApiDocument {
  const paths: OpenApiDocument['paths'] = {}
  for (const route of listRoutes()) {
    const path = toOpenApiPath(route.path)
    const item = paths[path] ?? {}
    item[route.method.toLowerCase() as HttpVerb] = operation(route)
    paths[path] = item
  }
  const hooks = webhooks()

  // Components: the `$id` schemas the operations reach, and what those reach in turn.
  const byId = new Map<string, TSchema>()
  for (const schema of ALL_SCHEMAS) if (typeof schema.$id === 'string') byId.set(schema.$id, schema)
  const wanted = new Set<string>(['ErrorBody'])
  refsIn(paths, wanted)
  refsIn(hooks, wanted)
  const schemas: Record<string, JsonSchema> = {}
  const queue = [...wanted]
  while (queue.length > 0) {
    const id = queue.shift() as string
    if (schemas[id]) continue
    const source = byId.get(id)
    if (!source) throw new Error(`schema ${id} is referenced but not in ALL_SCHEMAS`)
    const { $id: _id, ...rest } = plain(source)
    schemas[id] = rest
    const more = new Set<string>()
    refsIn(rest, more)
    for (const next of more) if (!schemas[next]) queue.push(next)
  }

  const sortedSchemas = Object.fromEntries(Object.entries(schemas).sort(([a], [b]) => a.localeCompare(b)))
  const ctx: ExampleContext = { schemas: sortedSchemas }
  for (const item of Object.values(paths)) for (const op of Object.values(item)) addExamples(op, ctx)
  for (const hook of Object.values(hooks)) addExamples(hook.post, ctx)
  return {
    openapi: '3.1.0',
    jsonSchemaDialect: DIALECT,
    info: {
      title: 'Prompt service API',
      version: options.version ?? '1.0.0',
      description: INFO_DESCRIPTION,
      license: DOCUMENT_LICENSE,
    },
    servers: options.serverUrl
      ? [{ url: options.serverUrl }]
      : [
          {
            url: '{scheme}://{host}',
            description:
              'Your gateway. The embedded default listens on localhost:8080 (`pnpm start`); in production, your HTTPS address.',
            variables: {
              scheme: { default: 'http', enum: ['http', 'https'] },
              host: { default: 'localhost:8080', description: 'host[:port] of the gateway' },
            },
          },
        ],
    tags: (Object.keys(ROUTE_TAGS) as RouteTag[]).map((name) => ({ name, description: ROUTE_TAGS[name] })),
    paths,
    webhooks: hooks,
    components: {
      schemas: sortedSchemas,
      securitySchemes: {
        apiKey: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'pk_<base62>',
          description:
            'An API key of one organization, with scopes: prompts:read, prompts:write, ' +
            'organization:read, organization:write. The scopes listed on an operation are the ones it needs.',
        },
        userToken: {
          type: 'http',
          scheme: 'bearer',
          bearerFormat: 'JWT',
          description:
            'A user access token from POST /api/v1/auth/login. The role in the organization grants ' +
            'the scopes: MEMBER prompts:read, prompts:write, organization:read; ADMIN and OWNER also organization:write.',
        },
      },
      headers: HEADERS,
    },
  }
}
