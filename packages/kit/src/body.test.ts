import { describe, expect, it } from 'vitest'
import { isJsonMediaType, JSON_MAX_DEPTH, parseJsonBody } from './body.ts'

describe('the one JSON body rule', () => {
  it.each([
    ['application/json', true],
    ['APPLICATION/JSON', true],
    ['Application/Json; charset=utf-8', true],
    [' application/json ;charset=UTF-8', true],
    ['application/jsonx', false],
    ['text/json', false],
    ['application/x-www-form-urlencoded; json', false],
    ['text/plain', false],
    [undefined, false],
  ])('%j is JSON: %s', (type, expected) => {
    expect(isJsonMediaType(type)).toBe(expected)
  })

  it('drops a leading byte-order mark, as Fastify did', () => {
    expect(parseJsonBody(Buffer.from('\ufeff{"a":1}', 'utf8'))).toEqual({ a: 1 })
  })

  it.each([[''], ['\ufeff'], ['{"a":'], ['{"__proto__":{"x":1}}'], ['{"constructor":{"prototype":{}}}']])(
    'refuses %j with 400 VALIDATION_ERROR',
    (text) => {
      expect(() => parseJsonBody(Buffer.from(text, 'utf8'))).toThrow(
        expect.objectContaining({ code: 'VALIDATION_ERROR' }),
      )
    },
  )

  it('refuses an object key containing U+0000 at any depth (MongoDB cannot store one): 400', () => {
    for (const text of ['{"a\\u0000":1}', '{"config":{"x":[{"\\u0000":1}]}}']) {
      expect(() => parseJsonBody(text), text).toThrow(
        expect.objectContaining({
          code: 'VALIDATION_ERROR',
          details: [{ path: '/body', message: 'must not have a key containing U+0000' }],
        }),
      )
    }
    // In a value it is text like any other.
    expect(parseJsonBody('{"a":"x\\u0000y","b":["\\u0000"]}')).toEqual({ a: 'x\u0000y', b: ['\u0000'] })
  })

  it('refuses a body nested deeper than JSON_MAX_DEPTH with 400 VALIDATION_ERROR', () => {
    // 5,000 levels in a 10 KB body overflowed the stack when render echoed it back.
    const deep = (n: number) => `{"variables":{"x":${'['.repeat(n)}${']'.repeat(n)}}}`
    expect(() => parseJsonBody(deep(5000))).toThrow(
      expect.objectContaining({
        code: 'VALIDATION_ERROR',
        details: [{ path: '/body', message: `must not nest more than ${JSON_MAX_DEPTH} levels deep` }],
      }),
    )
    // The body and its `variables` object are two levels: the value may take the rest.
    expect(() => parseJsonBody(deep(JSON_MAX_DEPTH - 1))).toThrow(
      expect.objectContaining({ code: 'VALIDATION_ERROR' }),
    )
    expect(parseJsonBody(deep(JSON_MAX_DEPTH - 2))).toHaveProperty('variables.x')
  })
})
