import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { providerFailure, sanitize } from '../src/domain/failure.ts'
import { chooseModel, mergeParams } from '../src/domain/params.ts'
import { anthropicBody } from '../src/services/providers/anthropic.ts'

describe('mergeParams', () => {
  it('takes the parameters from config, the request overriding each, and drops the rest of config', () => {
    expect(
      mergeParams(
        { model: 'm', temperature: 0.2, max_tokens: 10, note: 'x', stop: null },
        { temperature: 1, top_p: 0.5 },
      ),
    ).toEqual({ temperature: 1, max_tokens: 10, top_p: 0.5 })
  })

  it('refuses a config value a model cannot take, naming it', () => {
    const err = (() => {
      try {
        mergeParams({ temperature: 'hot' }, undefined)
      } catch (e) {
        return e
      }
    })() as AppError
    expect(err).toBeInstanceOf(AppError)
    expect(err.code).toBe('VALIDATION_ERROR')
    expect(JSON.stringify(err.details)).toContain('/config/temperature')
  })
})

describe('params.seed', () => {
  it('is a safe integer: one past 2^53 is not the seed asked for, 1e308 no seed at all', () => {
    expect(mergeParams({}, { seed: Number.MAX_SAFE_INTEGER })).toEqual({ seed: Number.MAX_SAFE_INTEGER })
    for (const seed of [2 ** 53, 1e308, -1e308, Number.MIN_SAFE_INTEGER - 2])
      expect(() => mergeParams({}, { seed }), String(seed)).toThrow(AppError)
  })
})

describe('chooseModel', () => {
  it('prefers the request, then config.model, then the connection', () => {
    expect(chooseModel('a', { model: 'b' }, ['c'])).toBe('a')
    expect(chooseModel(undefined, { model: 'b' }, ['c'])).toBe('b')
    expect(chooseModel(undefined, { model: 'bad name' }, ['c'])).toBe('c')
    expect(() => chooseModel(undefined, {}, [])).toThrow(AppError)
  })
})

describe('provider failures', () => {
  const secrets = ['sk-live-abcdefghijklmnop']
  const headers = (h: Record<string, string>) => new Headers(h)

  it('never lets the key or anything shaped like one through', () => {
    expect(sanitize('Incorrect API key provided: sk-live-abcdefghijklmnop.', secrets)).toBe(
      'Incorrect API key provided: [redacted].',
    )
    expect(sanitize('auth Bearer xyz123 and sk-other-0123456789', [])).not.toMatch(/xyz123|0123456789/)
  })

  it('redacts short secrets too: 4 characters anywhere, 1 to 3 where they stand alone', () => {
    expect(sanitize('invalid x-api-key: abcd (key abcdabcd)', ['abcd'])).toBe(
      'invalid x-api-key: [redacted] (key [redacted][redacted])',
    )
    expect(sanitize('Incorrect API key provided: k9. You can find your key at example', ['k9'])).toBe(
      'Incorrect API key provided: [redacted]. You can find your key at example',
    )
    // A 1-character key does not take that letter out of every word.
    expect(sanitize('invalid x-api-key: x; expected x-api-key', ['x'])).toBe(
      'invalid x-api-key: [redacted]; expected x-api-key',
    )
    expect(sanitize('header value (.) was refused', ['(.)', ' '])).toBe('header value [redacted] was refused')
  })

  it('maps a provider status to 502 with its status, and a 429 with its Retry-After', () => {
    const e = providerFailure(
      {
        status: 429,
        message: '429 slow down',
        headers: headers({ 'retry-after': '7' }),
        error: { error: { message: 'slow down' } },
      },
      { timedOut: false, timeoutMs: 1000, secrets },
    )
    expect(e).toMatchObject({
      code: 'PROVIDER_ERROR',
      statusCode: 502,
      details: { providerStatus: 429, retryAfter: '7', message: 'slow down' },
    })
    expect(e.headers).toEqual({ 'retry-after': '7' })
  })

  it('maps the deadline and a connect timeout to 504 PROVIDER_TIMEOUT, an unreachable host to 502', () => {
    expect(providerFailure(new Error('aborted'), { timedOut: true, timeoutMs: 5, secrets }).code).toBe(
      'PROVIDER_TIMEOUT',
    )
    const connect = Object.assign(new Error('Connection error.'), {
      cause: { code: 'UND_ERR_CONNECT_TIMEOUT' },
    })
    expect(providerFailure(connect, { timedOut: false, timeoutMs: 5, secrets }).code).toBe('PROVIDER_TIMEOUT')
    const refused = Object.assign(new Error('Connection error.'), { cause: { code: 'ECONNREFUSED' } })
    expect(providerFailure(refused, { timedOut: false, timeoutMs: 5, secrets })).toMatchObject({
      code: 'PROVIDER_ERROR',
      details: { providerStatus: null },
    })
  })
})

describe('the Anthropic request', () => {
  it('moves system messages to system and translates the parameters', () => {
    const body = anthropicBody({
      model: 'claude',
      signal: new AbortController().signal,
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'U' },
        { role: 'assistant', content: 'A' },
        { role: 'tool', content: 'T' },
      ],
      params: {
        stop: 'END',
        temperature: 0.5,
        seed: 1,
        tool_choice: 'required',
        tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }],
      },
    })
    expect(body).toEqual({
      model: 'claude',
      max_tokens: 4096,
      system: 'S',
      messages: [
        { role: 'user', content: 'U' },
        { role: 'assistant', content: 'A' },
        { role: 'user', content: 'T' },
      ],
      temperature: 0.5,
      stop_sequences: ['END'],
      tools: [{ name: 'f', input_schema: { type: 'object' } }],
      tool_choice: { type: 'any' },
    })
  })
})
