/**
 * The render benchmark (issue 26): renders per second of packages/template, in process.
 * - `flat`: a template without logic (the invoke path: renderCompiled of a cached compile);
 * - `logic`: a template with 3 references and a loop of 20 items (renderLogic, parts compiled once).
 * With `--main <path to a checkout>` the flat case is also run on that checkout's template
 * package, in the same process, so the two figures compare on the same machine and moment.
 * With `--handlebars <path to handlebars' main file>` the same two cases run on Handlebars
 * (noEscape, compiled once), for the engine choice in docs/decisions.md.
 *
 *   node --conditions=source --disable-warning=ExperimentalWarning bench/src/render.ts [--main /work/main] [--handlebars ...]
 */
import { createRequire } from 'node:module'
// By path: the bench measures this checkout's package as it is, like --main measures another's.
import * as template from '../../packages/template/src/index.ts'

type Render = () => string

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(name)
  return i === -1 ? undefined : process.argv[i + 1]
}

/** Renders per second: the median of 7 runs of `iterations` renders, after a warm-up. */
function measure(render: Render, iterations = 100_000): number {
  let sink = 0
  for (let i = 0; i < iterations; i++) sink += render().length
  const rates: number[] = []
  for (let run = 0; run < 7; run++) {
    const start = process.hrtime.bigint()
    for (let i = 0; i < iterations; i++) sink += render().length
    const ns = Number(process.hrtime.bigint() - start)
    rates.push(iterations / (ns / 1e9))
  }
  if (sink === 0) throw new Error('nothing rendered')
  rates.sort((a, b) => a - b)
  return rates[3] as number
}

const FLAT =
  'You are a support assistant for {{company}}. Answer the customer {{name}} politely, in {{language}}.\n' +
  'Their plan is {{plan}} and their question is: {{question}}\nKeep the answer under {{limit}} words.'
const FLAT_VALUES = {
  company: 'Acme',
  name: 'Ada',
  language: 'English',
  plan: 'pro',
  question: 'How do I reset my password?',
  limit: 120,
}
const VARIABLES = Object.keys(FLAT_VALUES).map((name) => ({ name, required: true }))

const LOGIC =
  '{{> header}}\n{{#if vip}}Priority customer.{{else}}Standard customer.{{/if}}\n' +
  'Order lines:\n{{#each items}}{{@index}}. {{this.name}} x{{this.qty}}{{#if this.gift}} (gift){{/if}}\n{{/each}}' +
  '{{> policy}}\n{{> footer}}'
const PARTS: Record<string, string> = {
  header: 'You are a support assistant for {{company}}. Answer {{name}} politely.',
  policy: 'Never promise refunds. {{#unless vip}}Offer the standard plan.{{/unless}}',
  footer: 'Answer in {{language}}, under {{limit}} words.',
}
const LOGIC_VALUES = {
  ...FLAT_VALUES,
  vip: true,
  items: Array.from({ length: 20 }, (_, i) => ({ name: `item ${i}`, qty: i + 1, gift: i % 3 === 0 })),
}

const results: Record<string, number> = {}

const compiled = template.compileTemplate(FLAT)
results['flat (this branch)'] = measure(
  () =>
    template.renderCompiled(compiled, VARIABLES, FLAT_VALUES, 'invoke', { maxOutputBytes: 1 << 20 })
      .renderedContent,
)

const main = arg('--main')
if (main) {
  const other = (await import(`${main}/packages/template/src/index.ts`)) as typeof template
  const otherCompiled = other.compileTemplate(FLAT)
  results['flat (main)'] = measure(
    () =>
      other.renderCompiled(otherCompiled, VARIABLES, FLAT_VALUES, 'invoke', { maxOutputBytes: 1 << 20 })
        .renderedContent,
  )
  // Again on this branch, so that a drift of the machine during the run shows.
  results['flat (this branch, again)'] = measure(
    () =>
      template.renderCompiled(compiled, VARIABLES, FLAT_VALUES, 'invoke', { maxOutputBytes: 1 << 20 })
        .renderedContent,
  )
}

const logic = template.compileLogic(LOGIC) as template.LogicTemplate
const parts = new Map(
  Object.entries(PARTS).map(([slug, t]) => [
    slug,
    template.compileLogicOrFlat(t, template.compileTemplate(t)),
  ]),
)
results['3 includes + 20-item loop'] = measure(
  () =>
    template.renderLogic(logic, VARIABLES, LOGIC_VALUES, 'invoke', {
      maxOutputBytes: 1 << 20,
      include: (ref) => parts.get(ref.slug),
    }).renderedContent,
  20_000,
)

const hbPath = arg('--handlebars')
if (hbPath) {
  const Handlebars = createRequire(import.meta.url)(hbPath) as {
    create(): {
      compile(t: string, o: object): (ctx: object) => string
      registerPartial(name: string, t: string): void
    }
  }
  const hb = Handlebars.create()
  const opts = {
    noEscape: true,
    strict: false,
    knownHelpersOnly: true,
    knownHelpers: { if: true, unless: true, each: true },
  }
  const flat = hb.compile(FLAT, opts)
  results['flat (handlebars)'] = measure(() => flat(FLAT_VALUES))
  for (const [slug, t] of Object.entries(PARTS)) hb.registerPartial(slug, t)
  const withLogic = hb.compile(LOGIC, opts)
  results['3 includes + 20-item loop (handlebars)'] = measure(() => withLogic(LOGIC_VALUES), 20_000)
}

for (const [name, rate] of Object.entries(results)) {
  console.log(`${name.padEnd(40)} ${Math.round(rate).toLocaleString('en-US').padStart(12)} renders/s`)
}
