import { describe, expect, it } from 'vitest'
import {
  CONFIG_LIMIT_BYTES,
  fieldProblems,
  foldText,
  formatConfig,
  parseConfig,
  parseTags,
  sideBySide,
} from '../src/lib.ts'

describe('parseTags', () => {
  it('trims, drops blanks and repeats', () => {
    expect(parseTags(' support, email,,support , ')).toEqual(['support', 'email'])
    expect(parseTags('')).toEqual([])
  })
})

describe('sideBySide', () => {
  it('pairs removed lines with the added lines after them and keeps context on both sides', () => {
    const rows = sideBySide([
      {
        oldStart: 1,
        oldLines: 3,
        newStart: 1,
        newLines: 4,
        lines: [' a', '-b', '-c', '+B', ' d', '+e', '\\ No newline at end of file'],
      },
    ])
    expect(rows).toEqual([
      [
        { left: { n: 1, text: 'a', kind: 'same' }, right: { n: 1, text: 'a', kind: 'same' } },
        { left: { n: 2, text: 'b', kind: 'removed' }, right: { n: 2, text: 'B', kind: 'added' } },
        { left: { n: 3, text: 'c', kind: 'removed' }, right: undefined },
        { left: { n: 4, text: 'd', kind: 'same' }, right: { n: 3, text: 'd', kind: 'same' } },
        { left: undefined, right: { n: 4, text: 'e', kind: 'added' } },
      ],
    ])
  })

  it('numbers each hunk from its own start', () => {
    const [first, second] = sideBySide([
      { oldStart: 1, oldLines: 1, newStart: 1, newLines: 1, lines: ['-x', '+y'] },
      { oldStart: 40, oldLines: 1, newStart: 40, newLines: 1, lines: [' z'] },
    ])
    expect(first?.[0]?.left?.n).toBe(1)
    expect(second?.[0]).toEqual({
      left: { n: 40, text: 'z', kind: 'same' },
      right: { n: 40, text: 'z', kind: 'same' },
    })
  })
})

describe('parseConfig', () => {
  it('reads empty as no config and a JSON object as the config', () => {
    expect(parseConfig('  ')).toEqual({ ok: true, value: null })
    expect(parseConfig('{"model": "m", "temperature": 0.2}')).toEqual({
      ok: true,
      value: { model: 'm', temperature: 0.2 },
    })
    expect(formatConfig({ model: 'm' })).toBe('{\n  "model": "m"\n}')
    expect(formatConfig(undefined)).toBe('')
  })

  it('refuses what is not a JSON object or is over the limit', () => {
    expect(parseConfig('{"model": ')).toMatchObject({ ok: false, error: expect.stringMatching(/^not JSON/) })
    for (const text of ['[1]', '"text"', '3', 'null']) {
      expect(parseConfig(text), text).toMatchObject({
        ok: false,
        error: expect.stringMatching(/JSON object/),
      })
    }
    const big = JSON.stringify({ notes: 'x'.repeat(CONFIG_LIMIT_BYTES) })
    expect(parseConfig(big)).toMatchObject({
      ok: false,
      error: expect.stringMatching(/bytes; at most 16384/),
    })
  })
})

describe('fieldProblems', () => {
  it('names the fields of a 400 in words, with what is wrong with each', () => {
    expect(
      fieldProblems([
        { path: '/body/name', message: 'must not be blank' },
        { path: '/body/messages/1/content', message: 'must hold no control characters' },
        { path: '/body/variables/0/defaultValue', message: 'too long' },
        { path: '/body', message: 'must have at least 1 property' },
      ]),
    ).toEqual([
      { field: 'name', message: 'must not be blank' },
      { field: 'messages › 2 › content', message: 'must hold no control characters' },
      { field: 'variables › 1 › default value', message: 'too long' },
      { field: '', message: 'must have at least 1 property' },
    ])
  })

  it('ignores details of another shape', () => {
    expect(fieldProblems(undefined)).toEqual([])
    expect(fieldProblems({ dependents: [{ slug: 'a' }] })).toEqual([])
    expect(fieldProblems([{ slug: 'a' }, null, 'x', { path: 'name', message: 'm' }])).toEqual([])
  })
})

describe('foldText', () => {
  it('leaves a text within the fold whole, and never cuts a surrogate pair in two', () => {
    expect(foldText('a'.repeat(10), 10)).toBeNull()
    expect(foldText('a'.repeat(11), 10)).toEqual({ head: 'a'.repeat(10), rest: 'a' })
    // An emoji whose first half is the 10th code unit goes with the head, whole.
    const folded = foldText(`${'a'.repeat(9)}😀bc`, 10)
    expect(folded).toEqual({ head: `${'a'.repeat(9)}😀`, rest: 'bc' })
    expect(foldText(`${'a'.repeat(9)}😀`, 10)).toBeNull()
  })
})
