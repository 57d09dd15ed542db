import { describe, expect, it } from 'vitest'
import { buildOpenApiDocument } from '../src/index.ts'
import { createResponseValidator } from '../src/validate.ts'

const ID = '0123456789abcdef01234567'
const ID2 = '0123456789abcdef01234568'

describe('the response validator', () => {
  const validator = createResponseValidator(buildOpenApiDocument())
  const json = 'application/json; charset=utf-8'

  it('accepts a body that matches the documented success', () => {
    const outcome = validator.validate({
      method: 'POST',
      url: `/api/v1/prompts/${ID}/invoke?env=production`,
      status: 200,
      contentType: json,
      body: { data: { renderedContent: 'Hi', variables: {}, promptId: ID, versionId: ID2, version: 1 } },
    })
    expect(outcome).toEqual({ ok: true, operationId: 'invokePrompt' })
  })

  it('refuses a success without the envelope, or with a wrong field', () => {
    const bare = validator.validate({
      method: 'POST',
      url: `/api/v1/prompts/${ID}/invoke`,
      status: 200,
      contentType: json,
      body: { renderedContent: 'Hi', variables: {}, promptId: ID, versionId: ID2, version: 1 },
    })
    expect(bare.ok).toBe(false)
    const wrong = validator.validate({
      method: 'POST',
      url: `/api/v1/prompts/${ID}/invoke`,
      status: 200,
      contentType: json,
      body: { data: { renderedContent: 'Hi', variables: {}, promptId: ID, versionId: ID2, version: 'one' } },
    })
    expect(wrong).toMatchObject({ ok: false, message: expect.stringContaining('version') })
  })

  it('accepts a documented error code and refuses one the route cannot answer', () => {
    const error = (code: string) => ({ error: { code, message: 'x', requestId: 'r1' } })
    expect(
      validator.validate({
        method: 'POST',
        url: `/api/v1/prompts/${ID}/publish`,
        status: 403,
        contentType: json,
        body: error('USER_TOKEN_REQUIRED'),
      }).ok,
    ).toBe(true)
    expect(
      validator.validate({
        method: 'POST',
        url: `/api/v1/prompts/${ID}/invoke`,
        status: 403,
        contentType: json,
        body: error('USER_TOKEN_REQUIRED'),
      }).ok,
    ).toBe(false)
    expect(
      validator.validate({
        method: 'POST',
        url: `/api/v1/prompts/${ID}/invoke`,
        status: 409,
        contentType: json,
        body: error('CONFLICT'),
      }),
    ).toMatchObject({ ok: false, message: expect.stringContaining('status not documented') })
  })

  it('matches a static segment before a parameter and refuses routes it does not know', () => {
    expect(
      validator.templateFor('GET', `/api/v1/prompts/${ID}/versions/diff?from=draft&to=draft`)?.path,
    ).toBe('/api/v1/prompts/{id}/versions/diff')
    expect(validator.templateFor('GET', `/api/v1/prompts/${ID}/versions/${ID2}`)?.path).toBe(
      '/api/v1/prompts/{id}/versions/{versionId}',
    )
    expect(validator.templateFor('POST', '/api/v1/prompts/import')?.operation.operationId).toBe(
      'importPrompts',
    )
    expect(
      validator.validate({ method: 'PUT', url: '/api/v1/prompts', status: 200, contentType: json, body: {} })
        .ok,
    ).toBe(false)
  })

  it('checks empty answers and other content types', () => {
    expect(
      validator.validate({
        method: 'POST',
        url: '/api/v1/auth/logout',
        status: 204,
        contentType: null,
        body: null,
      }).ok,
    ).toBe(true)
    expect(
      validator.validate({
        method: 'GET',
        url: 'http://127.0.0.1:8080/api/v1/docs',
        status: 200,
        contentType: 'text/html; charset=utf-8',
        body: '<!doctype html>',
      }).ok,
    ).toBe(true)
    expect(
      validator.validate({
        method: 'GET',
        url: '/api/v1/docs',
        status: 200,
        contentType: 'application/json',
        body: {},
      }).ok,
    ).toBe(false)
  })
})
