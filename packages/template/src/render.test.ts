import type { Variable } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { compileTemplate } from './compile.ts'
import { formatValue, renderCompiled, renderTemplate } from './render.ts'

const req = (name: string, defaultValue?: string): Variable =>
  defaultValue === undefined ? { name, required: true } : { name, required: true, defaultValue }
const opt = (name: string, defaultValue?: string): Variable =>
  defaultValue === undefined ? { name, required: false } : { name, required: false, defaultValue }

const invoke = (template: string, values: Record<string, unknown>, variables: Variable[] = []) =>
  renderTemplate(template, variables, values, 'invoke')
const inject = (template: string, values: Record<string, unknown>, variables: Variable[] = []) =>
  renderTemplate(template, variables, values, 'inject')

describe('formatValue', () => {
  it('renders each kind of value', () => {
    expect(formatValue('text')).toBe('text')
    expect(formatValue('')).toBe('')
    expect(formatValue(null)).toBe('')
    expect(formatValue(42)).toBe('42')
    expect(formatValue(-1.5)).toBe('-1.5')
    expect(formatValue(0)).toBe('0')
    expect(formatValue(Number.NaN)).toBe('NaN')
    expect(formatValue(true)).toBe('true')
    expect(formatValue(false)).toBe('false')
    expect(formatValue(10n)).toBe('10')
    expect(formatValue({ a: 1, b: [true, null] })).toBe('{"a":1,"b":[true,null]}')
    expect(formatValue([1, 'two', { three: 3 }])).toBe('[1,"two",{"three":3}]')
    expect(formatValue([])).toBe('[]')
    expect(formatValue({})).toBe('{}')
    expect(formatValue({ toJSON: () => undefined })).toBe('')
  })
})

describe('renderTemplate: substitution', () => {
  it('substitutes simple and spaced placeholders', () => {
    const r = invoke('Hello {{name}} from {{  city  }}!', { name: 'Ada', city: 'London' })
    expect(r).toEqual({ renderedContent: 'Hello Ada from London!', missingRequired: [], unresolved: [] })
  })

  it('renders a template with no placeholders unchanged', () => {
    expect(invoke('just text', {}).renderedContent).toBe('just text')
    expect(invoke('', {}).renderedContent).toBe('')
  })

  it('substitutes every occurrence of a repeated name', () => {
    expect(invoke('{{a}}-{{ a }}-{{a}}', { a: 'x' }).renderedContent).toBe('x-x-x')
  })

  it('handles adjacent placeholders', () => {
    expect(invoke('{{a}}{{b}}', { a: '1', b: '2' }).renderedContent).toBe('12')
  })

  it('keeps extra braces around a placeholder', () => {
    expect(invoke('{{{a}}}', { a: 'v' }).renderedContent).toBe('{v}')
    expect(invoke('{{{{a}}}}', { a: 'v' }).renderedContent).toBe('{{v}}')
    expect(invoke('{{a}}}', { a: 'v' }).renderedContent).toBe('v}')
  })

  it('renders only the inner placeholder of {{ {{a}} }}', () => {
    expect(invoke('{{ {{a}} }}', { a: 'v' }).renderedContent).toBe('{{ v }}')
  })

  it('leaves unbalanced braces as written', () => {
    expect(invoke('{{a', { a: 'v' }).renderedContent).toBe('{{a')
    expect(invoke('a}}', { a: 'v' }).renderedContent).toBe('a}}')
    expect(invoke('{{a}', { a: 'v' }).renderedContent).toBe('{{a}')
    expect(invoke('{{a {{a}}', { a: 'v' }).renderedContent).toBe('{{a v')
  })

  it('treats a placeholder split across lines as a placeholder', () => {
    expect(invoke('x {{\na\n}} y', { a: 'v' }).renderedContent).toBe('x v y')
    expect(invoke('{{\r\n\t a \r\n}}', { a: 'v' }).renderedContent).toBe('v')
  })

  it('leaves invalid names literal even when a matching key is supplied', () => {
    const values = { '1x': 'no', '': 'no', 'a b': 'no', '-a': 'no' }
    const t = '{{ 1x }} {{}} {{a b}} {{-a}} { {a} }'
    expect(invoke(t, values)).toEqual({ renderedContent: t, missingRequired: [], unresolved: [] })
    expect(inject(t, values)).toEqual({ renderedContent: t, missingRequired: [], unresolved: [] })
  })

  it('looks names with dots and hyphens up as flat keys', () => {
    const r = invoke('{{user.name}} {{first-name}} {{a.b-c}}', {
      'user.name': 'Ada',
      'first-name': 'Lovelace',
      'a.b-c': 'ok',
      user: { name: 'nested' },
    })
    expect(r.renderedContent).toBe('Ada Lovelace ok')
  })

  it('is case sensitive', () => {
    expect(invoke('{{Name}} {{name}}', { name: 'low', Name: 'Up' }).renderedContent).toBe('Up low')
  })

  it('preserves unicode around placeholders', () => {
    const t = '🎉 {{a}}🎉 中文{{b}}日本語 e\u0301{{c}}\u0301 👩‍👩‍👧 {{ d }}💥'
    const r = invoke(t, { a: '✓', b: '値', c: 'x', d: '🚀' })
    expect(r.renderedContent).toBe('🎉 ✓🎉 中文値日本語 e\u0301x\u0301 👩‍👩‍👧 🚀💥')
  })

  it('renders unicode values', () => {
    expect(invoke('[{{a}}]', { a: '𝔘𝔫𝔦 e\u0301 中' }).renderedContent).toBe('[𝔘𝔫𝔦 e\u0301 中]')
  })

  it('accepts unicode whitespace inside the braces', () => {
    expect(invoke('{{\u00a0a\u3000}}', { a: 'v' }).renderedContent).toBe('v')
  })

  it('does not treat unicode letters as name characters', () => {
    expect(invoke('{{名前}} {{café}}', { 名前: 'x', café: 'y' }).renderedContent).toBe('{{名前}} {{café}}')
  })
})

describe('renderTemplate: values', () => {
  it('renders numbers, booleans, objects and arrays', () => {
    const r = invoke('{{n}}|{{f}}|{{t}}|{{b}}|{{o}}|{{l}}|{{z}}', {
      n: 3,
      f: 2.5,
      t: true,
      b: false,
      o: { k: 'v', n: [1] },
      l: ['a', 1, null],
      z: 0,
    })
    expect(r.renderedContent).toBe('3|2.5|true|false|{"k":"v","n":[1]}|["a",1,null]|0')
  })

  it('renders null and "" as empty, and counts them as supplied', () => {
    const vars = [req('a'), req('b')]
    expect(invoke('[{{a}}][{{b}}]', { a: null, b: '' }, vars)).toEqual({
      renderedContent: '[][]',
      missingRequired: [],
      unresolved: [],
    })
    expect(inject('[{{a}}][{{b}}]', { a: null, b: '' }, vars).unresolved).toEqual([])
  })

  it('prefers a supplied null or "" over the default', () => {
    const vars = [opt('a', 'DEF'), opt('b', 'DEF')]
    expect(invoke('[{{a}}][{{b}}]', { a: null, b: '' }, vars).renderedContent).toBe('[][]')
  })

  it('treats an undefined value as not supplied', () => {
    const r = invoke('[{{a}}][{{b}}]', { a: undefined, b: undefined }, [req('a'), opt('b', 'd')])
    expect(r).toEqual({ renderedContent: '[][d]', missingRequired: ['a'], unresolved: ['a'] })
  })

  it('never re-expands placeholders inside values', () => {
    const r = invoke('{{a}} {{b}}', { a: '{{b}}', b: '{{a}} {{ c }} {{{b}}}', c: 'no' })
    expect(r.renderedContent).toBe('{{b}} {{a}} {{ c }} {{{b}}}')
  })

  it('does not re-expand values in inject mode either', () => {
    const r = inject('{{a}} {{b}}', { a: '{{b}}' })
    expect(r).toEqual({ renderedContent: '{{b}} {{b}}', missingRequired: [], unresolved: ['b'] })
  })

  it('renders values containing braces and special replacement patterns verbatim', () => {
    const r = invoke('{{a}}|{{b}}', { a: '{ } {{ }} }}{{', b: "$& $1 $$ $` $'" })
    expect(r.renderedContent).toBe("{ } {{ }} }}{{|$& $1 $$ $` $'")
  })

  it('renders a default that itself contains a placeholder verbatim', () => {
    expect(invoke('{{a}}', {}, [opt('a', '{{b}}')]).renderedContent).toBe('{{b}}')
  })

  it('ignores inherited properties of the values object', () => {
    const r = invoke('{{constructor}}|{{toString}}|{{__proto__}}', {})
    // `{{__proto__}}` is text, not a placeholder (issue 14, finding 9; docs/decisions.md).
    expect(r.renderedContent).toBe('||{{__proto__}}')
    expect(r.unresolved).toEqual(['constructor', 'toString'])
  })

  it('leaves {{__proto__}} as text even when the values hold an own __proto__ key (JSON.parse makes one)', () => {
    const values: Record<string, unknown> = JSON.parse('{"__proto__":"p","a":"v"}')
    expect(invoke('{{__proto__}}{{a}}', values).renderedContent).toBe('{{__proto__}}v')
    expect(Object.getPrototypeOf({})).toBe(Object.prototype)
  })

  it('accepts values with a null prototype', () => {
    const values: Record<string, unknown> = Object.create(null)
    values.a = 'v'
    expect(invoke('{{a}}', values).renderedContent).toBe('v')
  })
})

describe('renderTemplate: invoke mode', () => {
  it('reports missing required variables in declaration order', () => {
    const r = invoke('{{a}} {{b}} {{c}}', { b: 'B' }, [req('c'), req('a'), req('b')])
    expect(r.missingRequired).toEqual(['c', 'a'])
    expect(r.renderedContent).toBe(' B ')
  })

  it('reports a required variable as missing even when it has a default', () => {
    const r = invoke('{{a}}', {}, [req('a', 'DEF')])
    expect(r.missingRequired).toEqual(['a'])
    expect(r.renderedContent).toBe('DEF')
  })

  it('enforces declared required variables the template no longer uses', () => {
    expect(invoke('static', {}, [req('gone')]).missingRequired).toEqual(['gone'])
  })

  it('renders the default of a missing optional variable, else ""', () => {
    const r = invoke('[{{a}}][{{b}}]', {}, [opt('a', 'A-default'), opt('b')])
    expect(r).toEqual({ renderedContent: '[A-default][]', missingRequired: [], unresolved: ['b'] })
  })

  it('renders an undeclared, unsupplied placeholder as "" and lists it as unresolved', () => {
    const r = invoke('x{{ghost}}y{{ghost}}z', {}, [])
    expect(r).toEqual({ renderedContent: 'xyz', missingRequired: [], unresolved: ['ghost'] })
  })

  it('renders undeclared placeholders that are supplied', () => {
    expect(invoke('{{extra}}', { extra: 'e' }, [])).toEqual({
      renderedContent: 'e',
      missingRequired: [],
      unresolved: [],
    })
  })

  it('keeps the first of duplicate declarations', () => {
    const r = invoke('{{a}}', {}, [opt('a', 'first'), req('a')])
    expect(r).toEqual({ renderedContent: 'first', missingRequired: [], unresolved: [] })
  })

  it('ignores supplied keys that match no placeholder', () => {
    expect(invoke('x', { unused: 'u' }).renderedContent).toBe('x')
  })
})

describe('renderTemplate: inject mode', () => {
  it('leaves unresolved placeholders exactly as written', () => {
    const t = 'Hi {{ name }}, {{\n  city\n}} {{name}} {{zip}}'
    const r = inject(t, { zip: 123 })
    expect(r).toEqual({
      renderedContent: 'Hi {{ name }}, {{\n  city\n}} {{name}} 123',
      missingRequired: [],
      unresolved: ['name', 'city'],
    })
  })

  it('renders defaults and reports missing required without failing', () => {
    const r = inject('{{a}} {{b}} {{c}} {{d}}', { d: 'D' }, [req('a'), opt('b', 'B'), opt('c'), req('d')])
    expect(r).toEqual({ renderedContent: '{{a}} B {{c}} D', missingRequired: ['a'], unresolved: ['a', 'c'] })
  })

  it('keeps the braces around an unresolved placeholder', () => {
    expect(inject('{{{a}}}', {}).renderedContent).toBe('{{{a}}}')
    expect(inject('{{ {{a}} }}', {}).renderedContent).toBe('{{ {{a}} }}')
  })

  it('lists unresolved names once, in order of first appearance', () => {
    expect(inject('{{c}}{{a}}{{c}}{{b}}{{a}}', {}).unresolved).toEqual(['c', 'a', 'b'])
  })
})

describe('renderCompiled', () => {
  it('renders a compiled template repeatedly with different values', () => {
    const c = compileTemplate('Dear {{name}}, your code is {{code}}.')
    const vars = [req('name'), opt('code', '0000')]
    expect(renderCompiled(c, vars, { name: 'A', code: 1 }, 'invoke').renderedContent).toBe(
      'Dear A, your code is 1.',
    )
    expect(renderCompiled(c, vars, { name: 'B' }, 'invoke').renderedContent).toBe(
      'Dear B, your code is 0000.',
    )
    expect(renderCompiled(c, vars, {}, 'inject').renderedContent).toBe('Dear {{name}}, your code is 0000.')
    expect(renderCompiled(c, vars, {}, 'invoke').missingRequired).toEqual(['name'])
  })

  it('does not mutate the compiled template, variables or values', () => {
    const c = compileTemplate('{{a}} {{b}}')
    const vars = [opt('a', 'x')]
    const values = { b: 'y' }
    const before = JSON.stringify([c, vars, values])
    renderCompiled(c, vars, values, 'invoke')
    renderCompiled(c, vars, values, 'inject')
    expect(JSON.stringify([c, vars, values])).toBe(before)
  })
})

describe('large templates', () => {
  const varCount = 1_000
  const names = Array.from({ length: varCount }, (_, i) => `var_${i}.x-${i}`)
  // ~100,000 characters: each of the 1,000 variables appears once, padded with unicode filler.
  const chunk = (name: string) => `{{ ${name} }} ${'lorem ipsum 中文 🎉 '.repeat(4).slice(0, 80)}`
  const template = names.map(chunk).join('').padEnd(100_000, 'z').slice(0, 100_000)
  const variables: Variable[] = names.map((name, i) => (i % 2 === 0 ? req(name) : opt(name, `d${i}`)))
  const values: Record<string, unknown> = {}
  for (const [i, name] of names.entries()) if (i % 2 === 0) values[name] = i

  it('builds a 100,000 character template with 1,000 placeholders', () => {
    expect(template.length).toBe(100_000)
    expect(compileTemplate(template).names).toHaveLength(varCount)
  })

  it('renders it in both modes, repeatedly from one compiled template', () => {
    const c = compileTemplate(template)
    const first = renderCompiled(c, variables, values, 'invoke')
    expect(first.missingRequired).toEqual([])
    expect(first.unresolved).toEqual([])
    expect(first.renderedContent).not.toContain('{{')
    // Rendering leaves the compiled template untouched: a second render is identical.
    expect(renderCompiled(c, variables, values, 'invoke').renderedContent === first.renderedContent).toBe(
      true,
    )
    // Inject with nothing supplied keeps the required placeholders as written and fills the defaults.
    const preview = renderCompiled(c, variables, {}, 'inject')
    expect(preview.unresolved).toHaveLength(varCount / 2)
    expect(preview.missingRequired).toHaveLength(varCount / 2)
    expect(preview.renderedContent).toContain(`{{ ${names[0]} }}`)
    expect(preview.renderedContent).not.toContain(`{{ ${names[1]} }}`)
    expect(preview.renderedContent).toContain('d1 lorem')
  })

  it('reports every one of 1,000 missing required variables by name', () => {
    const r = renderTemplate(template, variables, {}, 'invoke')
    expect(r.missingRequired).toEqual(names.filter((_, i) => i % 2 === 0))
  })

  it('renders every placeholder of the large template correctly', () => {
    let expected = template
    for (const [i, name] of names.entries()) {
      expected = expected.split(`{{ ${name} }}`).join(i % 2 === 0 ? String(i) : `d${i}`)
    }
    const r = renderTemplate(template, variables, values, 'invoke')
    // Compared as a boolean so a failure does not print two 100,000 character strings.
    expect(r.renderedContent === expected).toBe(true)
    expect(r.renderedContent.startsWith('0 lorem')).toBe(true)
  })

  it('handles a template made only of placeholders', () => {
    const t = '{{a}}'.repeat(20_000)
    const r = renderTemplate(t, [], { a: 'b' }, 'invoke')
    expect(r.renderedContent).toBe('b'.repeat(20_000))
  })
})

describe('output size limit (issue 14, finding 2)', () => {
  it('counts UTF-8 bytes exactly', async () => {
    const { utf8Length } = await import('./compile.ts')
    for (const text of ['', 'abc', 'é', '€', '😀', 'a😀é€z', '\ud800', '\udc00x', 'x\ud83d']) {
      expect(utf8Length(text), JSON.stringify(text)).toBe(new TextEncoder().encode(text).length)
    }
  })

  it('refuses before building a text over the limit, and renders one at the limit', () => {
    const template = `ab${'{{x}}'.repeat(10)}cd`
    const values = { x: 'é'.repeat(5) } // 10 bytes each
    const exact = renderTemplate(template, [], values, 'invoke', { maxOutputBytes: 104 })
    expect(exact.renderedContent).toBe(`ab${'é'.repeat(50)}cd`)
    expect(() => renderTemplate(template, [], values, 'invoke', { maxOutputBytes: 103 })).toThrow(
      expect.objectContaining({ code: 'RENDER_TOO_LARGE', statusCode: 422 }),
    )
  })

  it('counts an unresolved placeholder of inject as written', () => {
    const template = 'a {{ missing }} b'
    expect(renderTemplate(template, [], {}, 'inject', { maxOutputBytes: 17 }).renderedContent).toBe(template)
    expect(() => renderTemplate(template, [], {}, 'inject', { maxOutputBytes: 16 })).toThrow(
      expect.objectContaining({ code: 'RENDER_TOO_LARGE' }),
    )
  })

  it('refuses 20,000 placeholders of a 1 KB value within a 1 MiB limit quickly, without building 20 MB', () => {
    const compiled = compileTemplate('{{x}}'.repeat(20_000))
    expect(() =>
      renderCompiled(compiled, [], { x: 'v'.repeat(1024) }, 'invoke', { maxOutputBytes: 1024 * 1024 }),
    ).toThrow(expect.objectContaining({ code: 'RENDER_TOO_LARGE' }))
  })
})
