import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { compileTemplate } from './compile.ts'
import {
  compileLogic,
  type LogicTemplate,
  MAX_BLOCK_DEPTH,
  renderLogic,
  templateSyntaxError,
  templateVariableNames,
} from './logic.ts'
import { renderCompiled, renderTemplate } from './render.ts'
import { syncVariables } from './variables.ts'

function render(t: string, values: Record<string, unknown>, mode: 'invoke' | 'inject' = 'invoke') {
  return renderTemplate(t, [], values, mode)
}

describe('compileLogic', () => {
  it('answers null for a template without logic (the flat path keeps it)', () => {
    expect(compileLogic('Hello {{name}}, {{{x}}} {{ a.b-c }} {{this}}')).toBeNull()
  })

  it.each([
    ['{{#if a}}x', '{{#if}} is never closed'],
    ['x{{else}}y', '{{else}} outside a block'],
    ['{{#if a}}x{{/each}}', 'closes {{#if}}'],
    ['{{/if}}', 'closes no open block'],
    ['{{#with a}}x{{/with}}', 'unknown block'],
    ['{{#if}}x{{/if}}', 'needs a variable name'],
    ['{{@index}}', 'only defined inside'],
    ['{{> Bad_Slug}}', 'bad reference'],
    ['{{> a@staging}}', 'bad reference selector'],
    ['{{#if a}}1{{else}}2{{else}}3{{/if}}', 'a second {{else}}'],
  ])('refuses %s', (t, message) => {
    expect(templateSyntaxError(t)?.message).toContain(message)
  })

  it(`refuses blocks nested deeper than ${MAX_BLOCK_DEPTH} levels (rendering them overflowed the stack)`, () => {
    const nested = (n: number) => `${'{{#if a}}'.repeat(n)}x${'{{/if}}'.repeat(n)}`
    expect(templateSyntaxError(nested(MAX_BLOCK_DEPTH))).toBeNull()
    expect(render(nested(MAX_BLOCK_DEPTH), { a: 1 }).renderedContent).toBe('x')
    expect(templateSyntaxError(nested(MAX_BLOCK_DEPTH + 1))?.message).toBe(
      `blocks nest deeper than ${MAX_BLOCK_DEPTH} levels`,
    )
    // What a 100,000-character template holds: refused at save; an old version of it renders flat.
    const deep = nested(6_200)
    expect(templateSyntaxError(deep)?.message).toContain('nest deeper')
    expect(render(deep, { a: 1 }).renderedContent).toBe(deep)
  })

  it('refuses __proto__ as a block operand: no request can supply it, as {{__proto__}} is text', () => {
    for (const t of [
      '{{#if __proto__}}x{{/if}}',
      '{{#unless __proto__}}x{{/unless}}',
      '{{#each __proto__}}x{{/each}}',
    ]) {
      expect(templateSyntaxError(t)?.message).toContain('__proto__ cannot be a variable')
      expect(templateVariableNames(t)).toBeNull()
    }
    expect(syncVariables('{{#if __proto__}}x{{/if}}', []).variables).toEqual([])
    expect(compileLogic('{{#if a}}{{__proto__}}{{/if}}')?.names).toEqual(['a'])
  })

  it('detects names of blocks and placeholders, not this/@index', () => {
    const t = compileLogic(
      '{{#if a}}{{b}}{{/if}}{{#each list}}{{this.x}}{{@index}}{{c}}{{/each}}{{> p@v3}}{{> p}}{{> p@v3}}',
    )
    expect(t?.names).toEqual(['a', 'b', 'list', 'c'])
    expect(t?.includes.map((r) => r.key)).toEqual(['p@v3', 'p'])
    expect(syncVariables('{{#unless z}}{{y}}{{/unless}}', []).variables.map((v) => v.name)).toEqual([
      'z',
      'y',
    ])
  })
})

describe('renderLogic', () => {
  it('if / else / unless with Handlebars truthiness', () => {
    const t = '{{#if x}}yes{{else}}no{{/if}}'
    for (const falsy of [false, null, '', 0, []]) expect(render(t, { x: falsy }).renderedContent).toBe('no')
    expect(render(t, {}).renderedContent).toBe('no')
    for (const yes of [true, 'a', 1, [0], {}]) expect(render(t, { x: yes }).renderedContent).toBe('yes')
    expect(render('{{#unless x}}u{{/unless}}', { x: 0 }).renderedContent).toBe('u')
  })

  it('each with this, this.field, @index, nested, else', () => {
    const t = '{{#each items}}{{@index}}:{{this.name}}({{#each this.tags}}{{this}}{{/each}}) {{/each}}'
    expect(
      render(t, {
        items: [
          { name: 'a', tags: ['x', 'y'] },
          { name: 'b', tags: [] },
        ],
      }).renderedContent,
    ).toBe('0:a(xy) 1:b() ')
    expect(render('{{#each xs}}{{this}}{{else}}none{{/each}}', { xs: [] }).renderedContent).toBe('none')
    expect(render('{{#each xs}}{{this}},{{/each}}', { xs: [1, 'two', null, { a: 1 }] }).renderedContent).toBe(
      '1,two,,{"a":1},',
    )
  })

  it('raw output, values never re-scanned, no prototype access', () => {
    expect(render('{{#if a}}{{a}}{{/if}}', { a: '<b>&{{x}}' }).renderedContent).toBe('<b>&{{x}}')
    const t = '{{#each xs}}[{{this.constructor}}{{this.toString}}{{this.__proto__}}]{{/each}}'
    expect(render(t, { xs: [{}] }).renderedContent).toBe('[]')
    expect(render('{{#if constructor}}y{{/if}}', {}).renderedContent).toBe('')
  })

  it('a loop over a non-array is a VALIDATION_ERROR naming the variable', () => {
    const err = (() => {
      try {
        render('{{#each xs}}{{this}}{{/each}}', { xs: 'abc' })
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('VALIDATION_ERROR')
    expect((err as AppError).details).toEqual([
      { path: '/body/variables/xs', message: 'xs must be an array' },
    ])
  })

  it('stops at the output cap without building the whole text', () => {
    const xs = Array.from({ length: 100_000 }, () => 1)
    const started = Date.now()
    expect(() =>
      renderTemplate('{{#each xs}}{{pad}}{{/each}}', [], { xs, pad: 'x'.repeat(100) }, 'invoke', {
        maxOutputBytes: 1024 * 1024,
      }),
    ).toThrow(/exceed 1048576 bytes/)
    expect(Date.now() - started).toBeLessThan(2000)
  })

  it('bounds work without output (loops in loops)', () => {
    const xs = Array.from({ length: 3000 }, () => 1)
    expect(() => render('{{#each xs}}{{#each xs}}{{/each}}{{/each}}', { xs })).toThrow(/steps/)
  })

  it('renders includes with the same variables; the loop item does not cross into them', () => {
    const child = compileLogic('{{#if vip}}VIP {{/if}}{{name}}') as LogicTemplate
    const parent = compileLogic('Hi {{> child}}! {{#each xs}}{{> child}}{{/each}}') as LogicTemplate
    const out = renderLogic(parent, [], { vip: true, name: 'Ann', xs: [1, 2] }, 'invoke', {
      include: (ref) => (ref.slug === 'child' ? child : undefined),
    })
    expect(out.renderedContent).toBe('Hi VIP Ann! VIP AnnVIP Ann')
    expect(out.included).toEqual(['child'])
  })

  it('bounds nesting across included parts (RENDER_TOO_LARGE), a cyclic include too', () => {
    const nested = (n: number, inner: string) => `${'{{#if a}}'.repeat(n)}${inner}${'{{/if}}'.repeat(n)}`
    const child = compileLogic(nested(40, 'x')) as LogicTemplate
    const parent = compileLogic(nested(40, '{{> child}}')) as LogicTemplate
    const include = (ref: { slug: string }) => (ref.slug === 'child' ? child : undefined)
    const err = (() => {
      try {
        renderLogic(parent, [], { a: 1 }, 'invoke', { include })
      } catch (e) {
        return e
      }
    })()
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('RENDER_TOO_LARGE')
    expect((err as AppError).details).toEqual({ maxDepth: MAX_BLOCK_DEPTH })
    const shallow = compileLogic(nested(10, '{{> child}}')) as LogicTemplate
    expect(renderLogic(shallow, [], { a: 1 }, 'invoke', { include }).renderedContent).toBe('x')
    // An include callback that answers the template itself ends at the bound, not in a RangeError.
    const self = compileLogic('{{> me}}') as LogicTemplate
    expect(() => renderLogic(self, [], {}, 'invoke', { include: () => self })).toThrow(/nest deeper/)
  })

  it('inject keeps unresolved placeholders and unresolvable references as written', () => {
    const out = render('{{#if a}}{{b}}{{/if}} {{> p@production}}', { a: 1 }, 'inject')
    expect(out.renderedContent).toBe('{{b}} {{> p@production}}')
    expect(out.unresolved).toEqual(['b'])
  })

  it('a template without logic renders as the flat renderer does', () => {
    const t = 'a {{x}} {{{y}}} {{else}} {{ z.q }} {{#nope}}'
    // {{else}} and {{#nope}} outside logic: an old stored version still renders as before.
    expect(render(t, { x: 1, y: 2, else: 3, 'z.q': 4 }).renderedContent).toBe(
      renderCompiled(compileTemplate(t), [], { x: 1, y: 2, else: 3, 'z.q': 4 }, 'invoke').renderedContent,
    )
  })
})
