import { describe, expect, it } from 'vitest'
import { isJsonMediaType, parseJsonBody } from './body.ts'

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
})
