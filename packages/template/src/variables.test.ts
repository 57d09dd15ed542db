import type { Variable, VariableInput } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import * as api from './index.ts'
import { syncVariables } from './variables.ts'

describe('syncVariables', () => {
  it('adds undeclared placeholders as required, in order of appearance', () => {
    expect(syncVariables('{{b}} {{a}} {{b}}', [])).toEqual({
      variables: [
        { name: 'b', required: true },
        { name: 'a', required: true },
      ],
      staleVariables: [],
    })
  })

  it('keeps declared variables first, then appends the undeclared ones', () => {
    const declared: VariableInput[] = [{ name: 'z', required: false, description: 'Zed', defaultValue: 'zz' }]
    expect(syncVariables('{{a}} {{z}} {{b}}', declared)).toEqual({
      variables: [
        { name: 'z', required: false, description: 'Zed', defaultValue: 'zz' },
        { name: 'a', required: true },
        { name: 'b', required: true },
      ],
      staleVariables: [],
    })
  })

  it('defaults a declared input without required to required', () => {
    const { variables } = syncVariables('{{a}}', [{ name: 'a', description: 'd' }])
    expect(variables).toEqual([{ name: 'a', required: true, description: 'd' }])
  })

  it('keeps required: false and preserves an empty default', () => {
    const { variables } = syncVariables('{{a}}', [{ name: 'a', required: false, defaultValue: '' }])
    expect(variables).toEqual([{ name: 'a', required: false, defaultValue: '' }])
  })

  it('does not add undefined optional keys', () => {
    const { variables } = syncVariables('{{a}}', [{ name: 'a' }])
    expect(Object.keys(variables[0] ?? {})).toEqual(['name', 'required'])
  })

  it('reports declared variables the template no longer uses, and keeps them', () => {
    const declared: Variable[] = [
      { name: 'old', required: true },
      { name: 'a', required: false },
      { name: 'older', required: false, defaultValue: 'x' },
    ]
    expect(syncVariables('{{a}} {{new}}', declared)).toEqual({
      variables: [
        { name: 'old', required: true },
        { name: 'a', required: false },
        { name: 'older', required: false, defaultValue: 'x' },
        { name: 'new', required: true },
      ],
      staleVariables: ['old', 'older'],
    })
  })

  it('keeps the first of duplicate declared names', () => {
    const { variables, staleVariables } = syncVariables('{{a}}', [
      { name: 'a', required: false, description: 'first' },
      { name: 'a', required: true, description: 'second' },
    ])
    expect(variables).toEqual([{ name: 'a', required: false, description: 'first' }])
    expect(staleVariables).toEqual([])
  })

  it('reports a duplicated stale name once', () => {
    expect(syncVariables('', [{ name: 'x' }, { name: 'x' }]).staleVariables).toEqual(['x'])
  })

  it('ignores invalid placeholders', () => {
    expect(syncVariables('{{ 1x }} {{}} {{a b}} {{ ok.name-1 }}', []).variables).toEqual([
      { name: 'ok.name-1', required: true },
    ])
  })

  it('does not mutate the declared inputs', () => {
    const declared: VariableInput[] = [{ name: 'a' }]
    const result = syncVariables('{{a}}', declared)
    expect(declared).toEqual([{ name: 'a' }])
    expect(result.variables[0]).not.toBe(declared[0])
  })

  it('handles 1,000 placeholders', () => {
    const template = Array.from({ length: 1_000 }, (_, i) => `{{v${i}}}`).join(' ')
    const { variables } = syncVariables(template, [{ name: 'v999', required: false }])
    expect(variables).toHaveLength(1_000)
    expect(variables[0]).toEqual({ name: 'v999', required: false })
    expect(variables[1]).toEqual({ name: 'v0', required: true })
  })
})

describe('package entry point', () => {
  it('exports the public API', () => {
    expect(Object.keys(api).sort()).toEqual([
      'DEFAULT_MAX_STEPS',
      'MAX_BLOCK_DEPTH',
      'TemplateSyntaxError',
      'asMessageList',
      'chatLogic',
      'chatTemplate',
      'chatVariableNames',
      'compileChat',
      'compileLogic',
      'compileLogicIfAny',
      'compileLogicOrFlat',
      'compileTemplate',
      'extractPlaceholders',
      'flatNodes',
      'formatValue',
      'messageBlock',
      'renderChat',
      'renderCompiled',
      'renderLogic',
      'renderTemplate',
      'syncVariableNames',
      'syncVariables',
      'templateSyntaxError',
      'templateVariableNames',
      'truthy',
    ])
  })
})
