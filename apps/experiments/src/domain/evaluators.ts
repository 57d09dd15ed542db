import type { Evaluator } from '@pm/contracts'
import { Ajv, type CodeOptions, type ValidateFunction } from 'ajv'
import { RE2JS } from 're2js'

/**
 * The evaluators of DESIGN section 14, as pure functions of one unit's outcome. Every score is
 * 0..1. `regex` runs on RE2JS (a JavaScript port of RE2): matching is linear in the input, so a
 * pattern that would backtrack forever in JavaScript's own engine (`(a+)+b`) cannot hang the
 * process; the few constructs RE2 does not have (backreferences, lookaround) are refused when
 * the experiment is created. `json-schema` runs its `pattern`s on RE2JS too (ajv's `code.regExp`).
 */

/** What one unit produced, as the evaluators see it. */
export interface Outcome {
  output: string
  expected: string | null
  variables: Record<string, unknown>
}

export type EvalResult = { score: number } | { error: string }

/** Asks the rubric prompt (`llm-judge`) for its verdict on one outcome: the model's answer text. */
export type Judge = (
  evaluator: Extract<Evaluator, { type: 'llm-judge' }>,
  variables: { input: string; output: string; expected: string },
) => Promise<string>

export interface CompiledEvaluator {
  name: string
  type: Evaluator['type']
  evaluate(outcome: Outcome, judge: Judge): Promise<EvalResult>
}

/** A problem with an evaluator as requested: its index and what is wrong. */
export class EvaluatorConfigError extends Error {
  readonly index: number
  constructor(index: number, message: string) {
    super(message)
    this.name = 'EvaluatorConfigError'
    this.index = index
  }
}

/** The output a regex or a JSON parse is given at most (a bound on the work per unit). */
export const EVALUATED_OUTPUT_MAX = 1_000_000

/**
 * A `json-schema` evaluator's schema, serialized, at most (a prompt's config has the same bound).
 * Ajv compiles a schema on the event loop, at creation and again when the experiment runs:
 * 20,000 properties took 27 s, an `enum` of 100,000 values 7 s, and the whole process (every
 * service, in the embedded default) waited.
 */
export const EVALUATOR_SCHEMA_MAX_BYTES = 16 * 1024

/** Whether `uniqueItems: true` is anywhere in `schema` (a loop: no recursion to overflow). */
function usesUniqueItems(schema: unknown): boolean {
  const stack: unknown[] = [schema]
  while (stack.length > 0) {
    const v = stack.pop()
    if (v === null || typeof v !== 'object') continue
    if (!Array.isArray(v) && (v as Record<string, unknown>).uniqueItems === true) return true
    for (const child of Object.values(v)) stack.push(child)
  }
  return false
}

/** Each evaluator's name: its own, else its type, with `-2`, `-3`... for repeats. */
export function evaluatorNames(evaluators: readonly Evaluator[]): string[] {
  const taken = new Set<string>()
  return evaluators.map((e) => {
    const base = e.name ?? e.type
    let name = base
    for (let n = 2; taken.has(name); n++) name = `${base}-${n}`
    taken.add(name)
    return name
  })
}

const clamp = (x: number): number => (x < 0 ? 0 : Math.min(x, 1))

/** How much of a judge's answer is searched for its score: its first and its last this many characters. */
const JUDGE_ANSWER_SEARCHED = 10_000

/**
 * The score a judge's answer holds: a JSON object with a numeric `score` (the whole answer, or
 * one inside a fenced block or surrounded by text), else a line `score: 0.8`, else the whole
 * answer being one number. Only 0..1 counts; anything else is no score (the unit's evaluator
 * errors). The patterns are linear and search a long answer's head and tail only: an answer of
 * many thousands of lines cannot stall the process.
 */
export function parseJudgeScore(answer: string): number | null {
  const whole = answer.trim()
  const inRange = (x: unknown): number | null =>
    typeof x === 'number' && Number.isFinite(x) && x >= 0 && x <= 1 ? x : null
  const fromObject = (candidate: string): { score: number | null } | null => {
    try {
      const parsed: unknown = JSON.parse(candidate)
      if (typeof parsed === 'object' && parsed !== null && 'score' in parsed) {
        const raw = (parsed as { score: unknown }).score
        return { score: inRange(typeof raw === 'string' && raw.trim() !== '' ? Number(raw) : raw) }
      }
    } catch {
      // not JSON: try the next form
    }
    return null
  }
  // The whole answer (or its one fenced block) as one object first: braces inside its strings
  // (`"uses {x}"`) are fine there.
  const unfenced = whole.startsWith('```')
    ? whole.slice(whole.indexOf('\n') + 1, whole.lastIndexOf('```')).trim()
    : whole
  if (unfenced.startsWith('{')) {
    const found = fromObject(unfenced)
    if (found) return found.score
  }
  const text =
    whole.length > 2 * JUDGE_ANSWER_SEARCHED
      ? `${whole.slice(0, JUDGE_ANSWER_SEARCHED)}\n${whole.slice(-JUDGE_ANSWER_SEARCHED)}`
      : whole
  for (const candidate of text.match(/\{[^{}]*\}/g) ?? []) {
    const found = fromObject(candidate)
    if (found) return found.score
  }
  // `[ \t]*`, not `\s*`, before the word: `\s*` after each of many newlines rescans them all.
  const line = /^[ \t]*\**score\**[ \t]*[:=]\s*(\d*\.\d+|\d+)/im.exec(text)
  if (line?.[1] !== undefined) return inRange(Number(line[1]))
  if (/^(?:\d+|\d*\.\d+)$/.test(text)) return inRange(Number(text))
  return null
}

/**
 * ajv's engine for `pattern` and `patternProperties`: RE2JS, so a schema's pattern matches in
 * linear time like the `regex` evaluator's (JSON Schema patterns are JavaScript syntax, hence
 * the translation). A pattern RE2 cannot run throws, and so fails the schema's compilation.
 */
const re2RegExp: NonNullable<CodeOptions['regExp']> = Object.assign(
  (pattern: string) => {
    const re = RE2JS.compile(RE2JS.translateRegExp(pattern))
    // ajv keys its compiled patterns by this string: one per pattern.
    return { test: (s: string) => re.matcher(s).find(), toString: () => `/${pattern}/` }
  },
  { code: 're2js' },
)

/** The evaluators whose work grows with the output (and the pattern or schema): run off the event loop. */
export type HeavyEvaluator = Extract<Evaluator, { type: 'regex' | 'json-schema' }>

export const isHeavy = (e: Evaluator): e is HeavyEvaluator => e.type === 'regex' || e.type === 'json-schema'

/**
 * A `regex` or `json-schema` evaluator as a synchronous function of the output: what the
 * sandbox's worker runs (`evaluatorWorker.ts`), or the runner itself where no sandbox is given.
 * Throws EvaluatorConfigError for a pattern or schema that cannot run.
 */
export function heavyScorer(e: HeavyEvaluator, index = 0, ajv = newAjv()): (output: string) => EvalResult {
  if (e.type === 'regex') {
    let re: RE2JS
    try {
      re = RE2JS.compile(e.pattern)
    } catch (err) {
      throw new EvaluatorConfigError(
        index,
        `pattern is not a supported regular expression (RE2 syntax): ${(err as Error).message}`,
      )
    }
    return (output) => ({ score: re.matcher(output.slice(0, EVALUATED_OUTPUT_MAX)).find() ? 1 : 0 })
  }
  const bytes = Buffer.byteLength(JSON.stringify(e.schema), 'utf8')
  if (bytes > EVALUATOR_SCHEMA_MAX_BYTES)
    throw new EvaluatorConfigError(
      index,
      `schema must be at most ${EVALUATOR_SCHEMA_MAX_BYTES} bytes serialized (it is ${bytes})`,
    )
  // Ajv compares array items pairwise: a 100 KB output of distinct objects took 1.6 s, a 1 MB
  // one minutes, all of it blocking the process.
  if (usesUniqueItems(e.schema))
    throw new EvaluatorConfigError(
      index,
      'schema must not use `uniqueItems`: its check takes time quadratic in the output',
    )
  let validate: ValidateFunction
  try {
    validate = ajv.compile(e.schema)
  } catch (err) {
    throw new EvaluatorConfigError(
      index,
      `schema is not a valid JSON Schema (patterns in RE2 syntax): ${(err as Error).message}`,
    )
  }
  // An `$async` schema's validate answers a promise (always truthy, its rejection unhandled).
  if ('$async' in validate && validate.$async)
    throw new EvaluatorConfigError(index, 'schema must not be `$async`: outputs are checked synchronously')
  return (output) => {
    let value: unknown
    try {
      value = JSON.parse(output.slice(0, EVALUATED_OUTPUT_MAX))
    } catch {
      return { score: 0 }
    }
    const valid: unknown = validate(value)
    if (typeof valid !== 'boolean') {
      // Refused at creation; should one get here, it is no score rather than a crash.
      if (valid instanceof Promise) valid.catch(() => {})
      return { error: 'the schema did not validate synchronously' }
    }
    return { score: valid ? 1 : 0 }
  }
}

/** Runs a heavy evaluator somewhere other than the event loop, with a deadline (sandbox.ts). */
export interface HeavyRunner {
  run(evaluator: HeavyEvaluator, output: string): Promise<EvalResult>
}

function compileOne(
  e: Evaluator,
  index: number,
  ajv: Ajv,
  sandbox: HeavyRunner | undefined,
): CompiledEvaluator['evaluate'] {
  switch (e.type) {
    case 'exact':
      return async ({ output, expected }) =>
        expected === null
          ? { error: 'the item has no expected output' }
          : { score: output.trim() === expected.trim() ? 1 : 0 }
    case 'contains': {
      const fixed = e.value
      return async ({ output, expected }) => {
        const needle = fixed ?? expected
        if (needle === null || needle === '')
          return { error: 'no value to look for: give `value` or an expected output' }
        return { score: output.includes(needle) ? 1 : 0 }
      }
    }
    case 'json-valid':
      return async ({ output }) => {
        try {
          JSON.parse(output.slice(0, EVALUATED_OUTPUT_MAX))
          return { score: 1 }
        } catch {
          return { score: 0 }
        }
      }
    case 'regex':
    case 'json-schema': {
      // Checked here either way, so that a pattern or schema that cannot run is refused at once.
      const inline = heavyScorer(e, index, ajv)
      if (!sandbox) return async ({ output }) => inline(output)
      return ({ output }) => sandbox.run(e, output)
    }
    case 'llm-judge':
      return async ({ output, expected, variables }, judge) => {
        let answer: string
        try {
          answer = await judge(e, { input: JSON.stringify(variables), output, expected: expected ?? '' })
        } catch (err) {
          // A provider's 429 is not the judge's verdict: the unit is given back and tried again.
          if ((err as { backoff?: unknown }).backoff === true) throw err
          return { error: `the judge's run failed: ${(err as Error).message}` }
        }
        const score = parseJudgeScore(answer)
        return score === null
          ? {
              error: `the judge's answer holds no score between 0 and 1: ${JSON.stringify(answer.slice(0, 200))}`,
            }
          : { score: clamp(score) }
      }
  }
}

/** Checks and prepares an experiment's evaluators; throws EvaluatorConfigError for a bad one. */
/** The Ajv that schemas of `json-schema` evaluators compile with (patterns on RE2JS). */
function newAjv(): Ajv {
  // Not strict: a schema written for another validator may carry keywords Ajv does not know.
  return new Ajv({ allErrors: false, strict: false, code: { regExp: re2RegExp } })
}

/**
 * Checks and prepares an experiment's evaluators; throws EvaluatorConfigError for a bad one.
 * With a sandbox, `regex` and `json-schema` run there (off the event loop, with a deadline).
 */
export function compileEvaluators(
  evaluators: readonly Evaluator[],
  sandbox?: HeavyRunner,
): CompiledEvaluator[] {
  const ajv = newAjv()
  const names = evaluatorNames(evaluators)
  return evaluators.map((e, i) => ({
    name: names[i] ?? e.type,
    type: e.type,
    evaluate: compileOne(e, i, ajv, sandbox),
  }))
}

/** Passing: every evaluator scored, and every score is at least this. */
export const PASS_THRESHOLD = 0.5

export interface Scored {
  scores: Record<string, number | null>
  evaluatorErrors: Record<string, string>
  passed: boolean
}

/** Runs every evaluator on one outcome (in order: the judge's calls are not made in parallel). */
export async function score(
  compiled: readonly CompiledEvaluator[],
  outcome: Outcome,
  judge: Judge,
): Promise<Scored> {
  const scores: Record<string, number | null> = {}
  const evaluatorErrors: Record<string, string> = {}
  let passed = true
  for (const ev of compiled) {
    const result = await ev.evaluate(outcome, judge)
    if ('score' in result) {
      scores[ev.name] = clamp(result.score)
      if (result.score < PASS_THRESHOLD) passed = false
    } else {
      scores[ev.name] = null
      evaluatorErrors[ev.name] = result.error
      passed = false
    }
  }
  return { scores, evaluatorErrors, passed }
}
