import type { Evaluator } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import {
  compileEvaluators,
  EVALUATOR_SCHEMA_MAX_BYTES,
  EvaluatorConfigError,
  evaluatorNames,
  type Judge,
  parseJudgeScore,
  score,
} from './evaluators.ts'

const noJudge: Judge = async () => {
  throw new Error('no judge here')
}
const outcome = (output: string, expected: string | null = null) => ({
  output,
  expected,
  variables: { q: 'x' },
})

async function one(e: Evaluator, output: string, expected: string | null = null, judge: Judge = noJudge) {
  const [compiled] = compileEvaluators([e])
  if (!compiled) throw new Error('nothing compiled')
  return compiled.evaluate(outcome(output, expected), judge)
}

describe('evaluators', () => {
  it.each([
    [{ type: 'exact' } as const, ' Paris ', 'Paris', 1],
    [{ type: 'exact' } as const, 'Lyon', 'Paris', 0],
    [{ type: 'contains', value: 'ok' } as const, 'it is ok.', null, 1],
    [{ type: 'contains' } as const, 'the answer is Paris', 'Paris', 1],
    [{ type: 'contains', value: 'no' } as const, 'yes', null, 0],
    [{ type: 'regex', pattern: '^\\d{3}-\\d{4}$' } as const, '555-1234', null, 1],
    [{ type: 'regex', pattern: '^\\d{3}$' } as const, '5555', null, 0],
    [{ type: 'json-valid' } as const, '{"a":1}', null, 1],
    [{ type: 'json-valid' } as const, '{a:1}', null, 0],
    [{ type: 'json-schema', schema: { type: 'object', required: ['a'] } } as const, '{"a":1}', null, 1],
    [{ type: 'json-schema', schema: { type: 'object', required: ['a'] } } as const, '{"b":1}', null, 0],
    [{ type: 'json-schema', schema: { type: 'object' } } as const, 'not json', null, 0],
  ])('%o on %j (expected %j) scores %d', async (e, output, expected, want) => {
    expect(await one(e, output, expected)).toEqual({ score: want })
  })

  it('exact without an expected output is an error of that evaluator, not a score', async () => {
    expect(await one({ type: 'exact' }, 'x')).toEqual({ error: expect.stringContaining('no expected') })
  })

  it('a pattern that backtracks forever in a backtracking engine answers at once (RE2: linear time)', async () => {
    const started = performance.now()
    const input = `${'a'.repeat(100_000)}c`
    expect(await one({ type: 'regex', pattern: '(a+)+b' }, input)).toEqual({ score: 0 })
    expect(await one({ type: 'regex', pattern: '^(a|aa)*$' }, `${'a'.repeat(100_000)}b`)).toEqual({
      score: 0,
    })
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('refuses patterns RE2 cannot run and schemas ajv cannot compile, naming the evaluator', () => {
    expect(() => compileEvaluators([{ type: 'exact' }, { type: 'regex', pattern: '(a)\\1' }])).toThrow(
      EvaluatorConfigError,
    )
    try {
      compileEvaluators([{ type: 'exact' }, { type: 'regex', pattern: '(?=a)' }])
    } catch (err) {
      expect((err as EvaluatorConfigError).index).toBe(1)
    }
    expect(() => compileEvaluators([{ type: 'json-schema', schema: { type: 'nonsense' } }])).toThrow(
      EvaluatorConfigError,
    )
  })

  it('names evaluators by type, numbering repeats', () => {
    expect(
      evaluatorNames([
        { type: 'exact' },
        { type: 'contains', value: 'a' },
        { type: 'contains', value: 'b' },
        { type: 'exact', name: 'strict' },
      ]),
    ).toEqual(['exact', 'contains', 'contains-2', 'strict'])
  })

  it.each([
    ['{"score": 0.8, "reason": "good"}', 0.8],
    ['Here is my verdict:\n```json\n{"score": 1}\n```', 1],
    ['{"score": "0.25"}', 0.25],
    ['Reasoning...\nScore: 0.4', 0.4],
    ['0.9', 0.9],
    ['{"score": 7}', null],
    ['{"score": -0.1}', null],
    ['It is a fine answer.', null],
    ['{"verdict": "good"}', null],
    ['', null],
    ['{"reason": "uses {x}", "score": 0.9}', 0.9],
    ['```json\n{"reason": "a {b} c", "score": 0.3}\n```', 0.3],
    ['**Score**: 1', 1],
  ])('reads the score of the judge answer %j as %s', (answer, want) => {
    expect(parseJudgeScore(answer)).toBe(want)
  })

  it('llm-judge: the rubric gets input, output and expected; no score in the answer is an error of that evaluator', async () => {
    const seen: unknown[] = []
    const judge: Judge = async (_e, vars) => {
      seen.push(vars)
      return vars.output === 'good' ? '{"score": 0.75}' : 'I like it'
    }
    const [compiled] = compileEvaluators([{ type: 'llm-judge', rubric: 'rubric' }])
    if (!compiled) throw new Error('nothing compiled')
    expect(await compiled.evaluate(outcome('good', 'exp'), judge)).toEqual({ score: 0.75 })
    expect(await compiled.evaluate(outcome('bad'), judge)).toEqual({
      error: expect.stringContaining('no score'),
    })
    expect(seen[0]).toEqual({ input: '{"q":"x"}', output: 'good', expected: 'exp' })
  })

  it('score(): passed only when every evaluator scored at least 0.5', async () => {
    const compiled = compileEvaluators([{ type: 'exact' }, { type: 'contains', value: 'Par' }])
    expect(await score(compiled, outcome('Paris', 'Paris'), noJudge)).toEqual({
      scores: { exact: 1, contains: 1 },
      evaluatorErrors: {},
      passed: true,
    })
    const missing = await score(compiled, outcome('Paris'), noJudge)
    expect(missing.passed).toBe(false)
    expect(missing.scores.exact).toBeNull()
  })

  it('a judge answer of many lines is read at once (linear patterns on its head and tail)', () => {
    const started = performance.now()
    expect(parseJudgeScore(`${'\n'.repeat(100_000)}score: 0.7`)).toBe(0.7)
    expect(parseJudgeScore(`Score: 0.2${' \n'.repeat(100_000)}x`)).toBe(0.2)
    expect(parseJudgeScore(`${'1'.repeat(100_000)}x`)).toBeNull()
    expect(parseJudgeScore('\n'.repeat(100_000))).toBeNull()
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('json-schema: an $async schema is refused (its validate answers a promise)', async () => {
    expect(() =>
      compileEvaluators([
        { type: 'exact' },
        { type: 'json-schema', schema: { $async: true, type: 'object' } },
      ]),
    ).toThrow(
      expect.objectContaining({
        name: 'EvaluatorConfigError',
        index: 1,
        message: expect.stringContaining('$async'),
      }),
    )
  })

  it('json-schema: a schema past EVALUATOR_SCHEMA_MAX_BYTES or using uniqueItems is refused (either blocked the process)', () => {
    const props = (n: number, pattern: string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, { type: 'string', pattern }]))
    expect(
      compileEvaluators([{ type: 'json-schema', schema: { properties: props(100, '^a') } }]),
    ).toHaveLength(1)
    for (const schema of [
      { properties: props(2_000, 'a{1,1000}') },
      { enum: Array.from({ length: 100_000 }, (_, i) => i) },
      { type: 'object', properties: { tags: { type: 'array', uniqueItems: true } } },
    ]) {
      const started = performance.now()
      expect(() => compileEvaluators([{ type: 'json-schema', schema }])).toThrow(EvaluatorConfigError)
      expect(performance.now() - started).toBeLessThan(1_000)
    }
    expect(EVALUATOR_SCHEMA_MAX_BYTES).toBe(16 * 1024)
  })

  it('json-schema: patterns run on RE2 (a catastrophic pattern answers, one RE2 cannot run is refused)', async () => {
    const e = { type: 'json-schema', schema: { type: 'string', pattern: '^(a+)+$' } } as const
    expect(await one(e, JSON.stringify(`${'a'.repeat(40)}b`))).toEqual({ score: 0 })
    expect(await one(e, JSON.stringify('aaaa'))).toEqual({ score: 1 })
    const props = {
      type: 'json-schema',
      schema: { type: 'object', patternProperties: { '^x-(a+)+$': { type: 'number' } } },
    } as const
    expect(await one(props, JSON.stringify({ [`x-${'a'.repeat(40)}b`]: 'not checked' }))).toEqual({
      score: 1,
    })
    expect(await one(props, JSON.stringify({ 'x-aa': 'a string' }))).toEqual({ score: 0 })
    // Two patterns in one schema are two (ajv keys each compiled pattern by its string).
    const two = {
      type: 'json-schema',
      schema: {
        type: 'object',
        properties: { a: { type: 'string', pattern: '^a$' }, b: { type: 'string', pattern: '^b$' } },
      },
    } as const
    expect(await one(two, '{"a":"a","b":"b"}')).toEqual({ score: 1 })
    expect(await one(two, '{"a":"a","b":"a"}')).toEqual({ score: 0 })
    for (const pattern of ['(a)\\1', '(?=a)']) {
      expect(() => compileEvaluators([{ type: 'json-schema', schema: { type: 'string', pattern } }])).toThrow(
        EvaluatorConfigError,
      )
    }
  })
})
