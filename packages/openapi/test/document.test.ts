import { ALL_SCHEMAS, ERROR_STATUS, listRoutes, routeErrors } from '@pm/contracts'
import { Validator } from '@seriousme/openapi-schema-validator'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { describe, expect, it } from 'vitest'
import { buildOpenApiDocument, type HttpVerb, toOpenApiPath } from '../src/index.ts'

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

describe('the OpenAPI document', () => {
  const doc = buildOpenApiDocument()

  it('is a valid OpenAPI 3.1 document (@seriousme/openapi-schema-validator)', async () => {
    const validator = new Validator()
    const result = await validator.validate(JSON.parse(JSON.stringify(doc)))
    expect(result.errors).toBeUndefined()
    expect(result.valid).toBe(true)
    expect(validator.version).toBe('3.1')
    // Every internal reference resolves.
    expect(() => validator.resolveRefs()).not.toThrow()
  })

  it('is refused by the same validator when a reference dangles', async () => {
    const broken = JSON.parse(JSON.stringify(doc))
    broken.paths['/api/v1/prompts'].get.responses['200'].content['application/json'].schema = {
      $ref: '#/components/schemas/NoSuchSchema',
    }
    const result = await new Validator().validate(broken)
    expect(result.valid).toBe(false)
  })

  it('has components that are valid JSON Schema 2020-12 under strict ajv, with every $ref resolving', () => {
    const ajv = new Ajv2020({ strict: true, allErrors: true })
    addFormats(ajv)
    // The container keyword only; each schema under it is compiled in strict mode.
    ajv.addKeyword('components')
    ajv.addSchema({ $id: 'doc', components: { schemas: doc.components.schemas } }, 'doc')
    for (const name of Object.keys(doc.components.schemas)) {
      expect(() => ajv.compile({ $ref: `doc#/components/schemas/${name}` }), name).not.toThrow()
    }
  })

  it('takes its components from schemas whose $id is unique (a duplicate stops every service)', () => {
    const ids = ALL_SCHEMAS.map((schema) => schema.$id)
    expect(ids.filter((id) => typeof id !== 'string')).toEqual([])
    expect(ids.filter((id, i) => ids.indexOf(id) !== i)).toEqual([])
  })

  it('describes every route of the catalogue once, with the catalogue operation id', () => {
    const routes = listRoutes()
    const ops = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.entries(item).map(([verb, op]) => ({
        key: `${verb.toUpperCase()} ${path}`,
        id: op.operationId,
      })),
    )
    expect(ops).toHaveLength(routes.length)
    expect(new Set(ops.map((o) => o.id)).size).toBe(ops.length)
    for (const route of routes) {
      const op = doc.paths[toOpenApiPath(route.path)]?.[route.method.toLowerCase() as HttpVerb]
      expect(op?.operationId, `${route.method} ${route.path}`).toBe(route.operationId)
    }
  })

  it('lists every failure of a route under its status, with the codes it can carry', () => {
    for (const route of listRoutes()) {
      const op = doc.paths[toOpenApiPath(route.path)]?.[route.method.toLowerCase() as HttpVerb]
      for (const code of routeErrors(route)) {
        const response = op?.responses[String(ERROR_STATUS[code])]
        expect(response?.description, `${route.operationId} ${code}`).toContain(code)
      }
    }
  })

  it('wraps successes in {data}, except the routes the gateway answers itself', () => {
    const invoke = doc.paths['/api/v1/prompts/{id}/invoke']?.post
    const schema = invoke?.responses['200']?.content?.['application/json']?.schema
    expect(schema).toMatchObject({
      required: ['data'],
      properties: { data: { $ref: '#/components/schemas/InvokeResult' } },
    })
    expect(invoke?.responses['200']?.headers).toHaveProperty('X-Service-Version')
    const own =
      doc.paths['/api/v1/openapi.json']?.get?.responses['200']?.content?.['application/json']?.schema
    expect(own).toEqual({ $ref: '#/components/schemas/OpenApiDocumentBody' })
  })

  it('describes credentials: public routes need none, user routes only a user token, scopes listed', () => {
    expect(doc.paths['/api/v1/auth/login']?.post?.security).toEqual([])
    expect(doc.paths['/api/v1/prompts/{id}/publish']?.post?.security).toEqual([{ userToken: [] }])
    expect(doc.paths['/api/v1/prompts']?.get?.security).toEqual([
      { apiKey: ['prompts:read'] },
      { userToken: ['prompts:read'] },
    ])
    expect(doc.components.securitySchemes).toHaveProperty('apiKey.scheme', 'bearer')
    expect(doc.paths['/api/v1/prompts/{id}/publish']?.post?.responses['403']?.description).toContain(
      'USER_TOKEN_REQUIRED',
    )
  })

  it('documents query and path parameters, the multipart import and the webhook event', () => {
    const list = doc.paths['/api/v1/prompts']?.get?.parameters ?? []
    expect(list.map((p) => p.name)).toEqual(
      expect.arrayContaining(['page', 'limit', 'search', 'tags', 'visibility', 'organizationId']),
    )
    expect(list.find((p) => p.name === 'limit')).toMatchObject({ in: 'query', required: false })
    const diff = doc.paths['/api/v1/prompts/{id}/versions/diff']?.get?.parameters ?? []
    expect(diff.filter((p) => p.required).map((p) => p.name)).toEqual(['id', 'from', 'to'])
    // What render accepts: inject takes the workspace in the query, public invoke no query at all.
    const inject = doc.paths['/api/v1/prompts/{id}/inject']?.post
    expect(inject?.parameters?.map((p) => [p.name, p.in])).toEqual([
      ['id', 'path'],
      ['organizationId', 'query'],
    ])
    const publicInvoke = doc.paths['/api/v1/public/prompts/{id}/invoke']?.post
    expect(publicInvoke?.parameters?.map((p) => p.name)).toEqual(['id'])
    expect(publicInvoke?.requestBody?.required).toBe(false)
    expect(publicInvoke?.description).toContain('`null`')
    expect(doc.paths['/api/v1/prompts/import']?.post?.requestBody?.content).toHaveProperty(
      'multipart/form-data',
    )
    expect(doc.webhooks['version.published']?.post.requestBody?.content['application/json']?.schema).toEqual({
      $ref: '#/components/schemas/VersionPublishedEvent',
    })
    expect(Object.keys(doc.webhooks).sort()).toEqual([
      'environment.promoted',
      'prompt.deleted',
      'prompt.visibility.changed',
      'version.published',
    ])
    expect(doc.webhooks['prompt.deleted']?.post.requestBody?.content['application/json']?.schema).toEqual({
      $ref: '#/components/schemas/PromptDeletedEvent',
    })
  })

  it('lists a templated server by default (issue 18: clients need one), the given URL when given', () => {
    expect(doc.servers.map((s) => s.url)).toEqual(['{scheme}://{host}'])
    expect(buildOpenApiDocument({ serverUrl: 'https://prompts.example.com' }).servers).toEqual([
      { url: 'https://prompts.example.com' },
    ])
  })
})
