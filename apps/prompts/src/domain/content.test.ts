import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { buildContent, checkConfig, checkTypeUnchanged } from './content.ts'

function code(fn: () => unknown): string | undefined {
  try {
    fn()
  } catch (err) {
    if (err instanceof AppError) return `${err.code} ${JSON.stringify(err.details)}`
    throw err
  }
  return undefined
}

describe('prompt content rules (DESIGN section 9)', () => {
  it('a text prompt takes a template and no messages', () => {
    expect(buildContent('text', { template: 'Hi {{a}}' }, [])).toEqual({
      template: 'Hi {{a}}',
      variables: [{ name: 'a', required: true }],
      staleVariables: [],
    })
    expect(code(() => buildContent('text', {}, []))).toMatch(/^VALIDATION_ERROR .*\/body\/template/)
    expect(
      code(() => buildContent('text', { template: 'x', messages: [{ role: 'user', content: 'x' }] }, [])),
    ).toMatch(/^VALIDATION_ERROR .*\/body\/messages/)
  })

  it('a chat prompt derives its template and detects variables across messages; placeholders are required', () => {
    const content = buildContent(
      'chat',
      {
        messages: [
          { role: 'system', content: 'You are {{persona}}.' },
          { type: 'placeholder', name: 'history' },
          { role: 'user', content: '{{question}} ({{persona}})' },
        ],
      },
      [
        { name: 'history', required: false },
        { name: 'persona', required: false, defaultValue: 'kind' },
      ],
    )
    expect(content.template).toBe(
      '[system]\nYou are {{persona}}.\n\n[placeholder history]\n\n[user]\n{{question}} ({{persona}})',
    )
    expect(content.variables).toEqual([
      { name: 'history', required: true },
      { name: 'persona', required: false, defaultValue: 'kind' },
      { name: 'question', required: true },
    ])
    expect(code(() => buildContent('chat', { messages: [] }, []))).toMatch(/^VALIDATION_ERROR/)
    expect(code(() => buildContent('chat', {}, []))).toMatch(/^VALIDATION_ERROR/)
    expect(
      code(() => buildContent('chat', { template: 'x', messages: [{ role: 'user', content: 'x' }] }, [])),
    ).toMatch(/^VALIDATION_ERROR .*\/body\/template/)
    const long = Array.from({ length: 3 }, () => ({ role: 'user' as const, content: 'x'.repeat(40_000) }))
    expect(code(() => buildContent('chat', { messages: long }, []))).toMatch(/^VALIDATION_ERROR/)
  })

  it('config is at most 16 KiB serialized and 64 levels deep; the type is fixed', () => {
    expect(checkConfig({ model: 'x' })).toEqual({ model: 'x' })
    expect(code(() => checkConfig({ blob: 'x'.repeat(16 * 1024) }))).toMatch(
      /^VALIDATION_ERROR .*\/body\/config/,
    )
    // Bytes, not characters.
    expect(code(() => checkConfig({ s: 'é'.repeat(8190) }))).toMatch(/^VALIDATION_ERROR/)
    expect(code(() => checkConfig({ s: 'e'.repeat(8190) }))).toBeUndefined()
    // Nested at most 64 levels (objects and arrays alike), checked before it is serialized: a
    // config 5,000 deep would overflow JSON.stringify's stack (a 500) and is a 400 instead.
    const nested = (depth: number): Record<string, unknown> => {
      let v: unknown = 1
      for (let i = 1; i < depth; i++) v = i % 2 ? [v] : { a: v }
      return { a: v }
    }
    expect(code(() => checkConfig(nested(64)))).toBeUndefined()
    expect(code(() => checkConfig(nested(65)))).toMatch(/^VALIDATION_ERROR .*\/body\/config/)
    expect(code(() => checkConfig(nested(5_000)))).toMatch(/^VALIDATION_ERROR .*\/body\/config/)
    expect(code(() => checkTypeUnchanged('text', 'chat'))).toMatch(/^VALIDATION_ERROR .*\/body\/type/)
    expect(code(() => checkTypeUnchanged('chat', 'chat'))).toBeUndefined()
    expect(code(() => checkTypeUnchanged('chat', undefined))).toBeUndefined()
  })
})
