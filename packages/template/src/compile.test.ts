import { describe, expect, it } from 'vitest'
import { compileTemplate, extractPlaceholders } from './compile.ts'

describe('extractPlaceholders', () => {
  it('finds simple and spaced placeholders', () => {
    expect(extractPlaceholders('Hi {{name}}, {{  city  }}!')).toEqual(['name', 'city'])
  })

  it('returns unique names in order of first appearance', () => {
    expect(extractPlaceholders('{{b}} {{a}} {{b}} {{ a }} {{c}}')).toEqual(['b', 'a', 'c'])
  })

  it('returns nothing for a template without placeholders', () => {
    expect(extractPlaceholders('')).toEqual([])
    expect(extractPlaceholders('plain text { } }} {{')).toEqual([])
  })

  it('accepts names with dots, hyphens, underscores and digits', () => {
    expect(extractPlaceholders('{{user.name}} {{first-name}} {{_x9}} {{a.b-c_d.0}} {{a-}} {{a.}}')).toEqual([
      'user.name',
      'first-name',
      '_x9',
      'a.b-c_d.0',
      'a-',
      'a.',
    ])
  })

  it('ignores invalid names', () => {
    for (const t of [
      '{{ 1x }}',
      '{{}}',
      '{{   }}',
      '{{a b}}',
      '{{-a}}',
      '{{.a}}',
      '{{a!}}',
      '{{é}}',
      '{{a}b}}',
    ]) {
      expect(extractPlaceholders(t), t).toEqual([])
    }
  })

  it('handles adjacent placeholders', () => {
    expect(extractPlaceholders('{{a}}{{b}}{{a}}')).toEqual(['a', 'b'])
  })

  it('finds the inner placeholder inside extra braces', () => {
    expect(extractPlaceholders('{{{a}}}')).toEqual(['a'])
    expect(extractPlaceholders('{{{{a}}}}')).toEqual(['a'])
    expect(extractPlaceholders('{{ {{a}} }}')).toEqual(['a'])
  })

  it('ignores unbalanced braces', () => {
    expect(extractPlaceholders('{{a')).toEqual([])
    expect(extractPlaceholders('a}}')).toEqual([])
    expect(extractPlaceholders('{{a}')).toEqual([])
    expect(extractPlaceholders('{a}}')).toEqual([])
    expect(extractPlaceholders('{{a {{b}}')).toEqual(['b'])
  })

  it('treats newlines and tabs as whitespace inside the braces', () => {
    expect(extractPlaceholders('{{\na\n}}')).toEqual(['a'])
    expect(extractPlaceholders('{{\r\n\tb \r\n}}')).toEqual(['b'])
  })

  it('does not allow a line break inside a name', () => {
    expect(extractPlaceholders('{{a\nb}}')).toEqual([])
  })
})

describe('compileTemplate', () => {
  it('splits a template into literal segments and slots', () => {
    const c = compileTemplate('Hello {{ name }}, bye {{name}}!')
    expect(c.names).toEqual(['name'])
    expect(c.slots).toEqual([
      { before: 'Hello ', id: 0, raw: '{{ name }}' },
      { before: ', bye ', id: 0, raw: '{{name}}' },
    ])
    expect(c.tail).toBe('!')
    expect(c.source).toBe('Hello {{ name }}, bye {{name}}!')
  })

  it('keeps a template without placeholders as a single tail', () => {
    const c = compileTemplate('no slots {{ 1 }}')
    expect(c.slots).toEqual([])
    expect(c.tail).toBe('no slots {{ 1 }}')
  })

  it('keeps the surrounding braces of {{{a}}} as literals', () => {
    const c = compileTemplate('{{{a}}}')
    expect(c.slots).toEqual([{ before: '{', id: 0, raw: '{{a}}' }])
    expect(c.tail).toBe('}')
  })

  it('parses pathological inputs (long runs of braces, spaces and names)', () => {
    // The scanner never backtracks over a failed attempt (see compile.ts); these are the inputs that
    // would make a naive regex quadratic. Here they are checked for their result.
    const n = 100_000
    const noSlots = [
      '{'.repeat(n),
      '}'.repeat(n),
      '{{ '.repeat(n / 4),
      '{{a'.repeat(n / 3),
      '{{a }'.repeat(n / 5),
      `{{${' '.repeat(n)}`,
      `{{${'a'.repeat(n)}`,
      `{{${'a'.repeat(n)} x}}`,
    ]
    for (const input of noSlots) {
      const c = compileTemplate(input)
      expect(c.slots, input.slice(0, 12)).toHaveLength(0)
      expect(c.tail === input, input.slice(0, 12)).toBe(true)
    }
    const spaced = compileTemplate(`{{${' '.repeat(n)}a${' '.repeat(n)}}}`)
    expect(spaced.names).toEqual(['a'])
    const many = compileTemplate('{{a}}'.repeat(n / 5))
    expect(many.slots).toHaveLength(n / 5)
    expect(many.names).toEqual(['a'])
  })
})

describe('__proto__ (issue 14, finding 9)', () => {
  it('is not a placeholder: no request can supply it, so it stays text', () => {
    expect(extractPlaceholders('{{__proto__}} and {{ __proto__ }} and {{a}}')).toEqual(['a'])
    expect(compileTemplate('x {{__proto__}} y').tail).toBe('x {{__proto__}} y')
    expect(extractPlaceholders('{{__proto__x}} {{constructor}}')).toEqual(['__proto__x', 'constructor'])
  })
})
