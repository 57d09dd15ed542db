import { describe, expect, it } from 'vitest'
import { fieldsFromConfig, mergeIntoConfig, parseParams, readRunStream, RunError } from '../src/playground.ts'

describe('parseParams', () => {
  it('leaves empty fields out and parses the rest', () => {
    const f = fieldsFromConfig({})
    expect(parseParams(f)).toEqual({ ok: true, value: {} })
    const parsed = parseParams({
      ...f,
      temperature: '0.3',
      max_tokens: '64',
      stop: 'END\n\nSTOP',
      tools: '[{"type":"function","function":{"name":"lookup"}}]',
      responseFormat: 'json_object',
    })
    expect(parsed).toEqual({
      ok: true,
      value: {
        temperature: 0.3,
        max_tokens: 64,
        stop: ['END', 'STOP'],
        tools: [{ type: 'function', function: { name: 'lookup' } }],
        response_format: { type: 'json_object' },
      },
    })
  })
  it('names the field that is wrong', () => {
    const f = fieldsFromConfig({})
    expect(parseParams({ ...f, temperature: '3' })).toMatchObject({ ok: false, error: /Temperature/ })
    expect(parseParams({ ...f, max_tokens: '1.5' })).toMatchObject({ ok: false, error: /Max tokens/ })
    expect(parseParams({ ...f, tools: '{' })).toMatchObject({ ok: false, error: /Tools is not JSON/ })
    expect(parseParams({ ...f, tools: '{}' })).toMatchObject({ ok: false, error: /JSON list/ })
    expect(parseParams({ ...f, stop: 'a\nb\nc\nd\ne' })).toMatchObject({ ok: false, error: /at most 4/ })
    expect(parseParams({ ...f, responseFormat: 'json_schema', jsonSchema: '[]' })).toMatchObject({
      ok: false,
    })
  })
})

describe('fieldsFromConfig and mergeIntoConfig', () => {
  const config = {
    model: 'old-model',
    temperature: 0.9,
    stop: 'END',
    response_format: { type: 'json_schema', json_schema: { name: 'x' } },
    vendor_extra: { keep: true },
  }
  it('round-trips a config through the fields', () => {
    const f = fieldsFromConfig(config)
    expect(f).toMatchObject({ temperature: '0.9', stop: 'END', responseFormat: 'json_schema' })
    const parsed = parseParams(f)
    expect(parsed.ok && mergeIntoConfig(config, 'old-model', parsed.value)).toEqual(config)
  })
  it('writes the model and parameters, keeps every other key, removes a cleared parameter', () => {
    const merged = mergeIntoConfig(config, 'new-model', {
      max_tokens: 10,
      tools: [{ function: { name: 't' } }],
    })
    expect(merged).toEqual({
      model: 'new-model',
      max_tokens: 10,
      tools: [{ function: { name: 't' } }],
      vendor_extra: { keep: true },
    })
    expect(mergeIntoConfig(null, '', {})).toEqual({})
  })
})

function streamOf(chunks: string[]): ReadableStream<Uint8Array> {
  const enc = new TextEncoder()
  return new ReadableStream({
    start(c) {
      for (const chunk of chunks) c.enqueue(enc.encode(chunk))
      c.close()
    },
  })
}

describe('readRunStream', () => {
  it('reports deltas (split across chunks) and resolves with done', async () => {
    const deltas: string[] = []
    const result = await readRunStream(
      streamOf([
        'event: delta\ndata: {"content":"Hel',
        'lo "}\n\n: keep-alive\n\n',
        'event: delta\ndata: {"content":"you"}\n\nevent: done\ndata: {"runId":"r1"}\n\n',
      ]),
      { onDelta: (d) => deltas.push(d) },
    )
    expect(deltas).toEqual(['Hello ', 'you'])
    expect(result).toEqual({ runId: 'r1' })
  })
  it('rejects with the error event, and when the stream ends early', async () => {
    const failing = readRunStream(
      streamOf([
        'event: error\ndata: {"code":"PROVIDER_ERROR","message":"bad key","details":{"providerStatus":401}}\n\n',
      ]),
      { onDelta: () => {} },
    )
    await expect(failing).rejects.toMatchObject({
      code: 'PROVIDER_ERROR',
      message: 'bad key',
      details: { providerStatus: 401 },
    })
    await expect(
      readRunStream(streamOf(['event: delta\ndata: {"content":"x"}\n\n']), { onDelta: () => {} }),
    ).rejects.toBeInstanceOf(RunError)
  })
})
