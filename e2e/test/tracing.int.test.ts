import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { OtlpReceiver, type ReceivedSpan } from '../src/otlpReceiver.ts'
import { type Stack, startStack } from '../src/stack.ts'
import { WebhookReceiver } from '../src/webhookReceiver.ts'
import {
  createApiKey,
  createPrompt,
  createWebhook,
  login,
  publishVersion,
  type Session,
} from '../src/webhooks.ts'

const SERVER = 2
const PRODUCER = 4
const CONSUMER = 5

describe('traces (distributed mode, real NATS): one trace across the services', () => {
  let stack: Stack
  let otlp: OtlpReceiver
  let hooks: WebhookReceiver
  let s: Session

  beforeAll(async () => {
    otlp = await OtlpReceiver.start()
    hooks = await WebhookReceiver.start()
    stack = await startStack({
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      WEBHOOK_POLL_MS: '100',
      WEBHOOK_CONSUMER: `webhooks-tracing-${newId()}`,
    })
    s = await login(stack.gateway)
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
    await hooks?.close()
    await otlp?.close()
  })

  /** The gateway's server span of the request that answered with this request id. */
  const gatewaySpan = (route: string, method: string) =>
    otlp.spans.find(
      (sp) =>
        sp.service === 'gateway' &&
        sp.kind === SERVER &&
        sp.attributes['http.route'] === route &&
        sp.attributes['http.request.method'] === method,
    )

  const names = (spans: ReceivedSpan[]) => spans.map((sp) => `${sp.service}:${sp.name}`)

  it('invoke that misses the cache: gateway → render → prompts in one trace', async () => {
    const promptId = await createPrompt(stack.gateway, s, `Traced ${newId()}`)
    await publishVersion(stack.gateway, s, promptId)
    const key = await createApiKey(stack.gateway, s, ['prompts:read'])
    const res = await call(stack.gateway, 'POST', `/api/v1/prompts/${promptId}/invoke`, {
      token: key,
      body: { variables: { name: 'Ada' } },
    })
    expect(res.status).toBe(200)

    let resolve: ReceivedSpan | undefined
    await vi.waitFor(
      () => {
        const root = gatewaySpan('/api/v1/prompts/:id/invoke', 'POST')
        expect(root).toBeDefined()
        resolve = otlp
          .trace(root?.traceId ?? '')
          .find((sp) => sp.service === 'prompts' && sp.kind === SERVER && sp.name.includes('/resolve'))
        expect(resolve, names(otlp.trace(root?.traceId ?? '')).join('\n')).toBeDefined()
        // Each process exports on its own schedule: wait until the whole chain has arrived.
        expect(otlp.ancestry(resolve as ReceivedSpan).at(-1)?.spanId).toBe(root?.spanId)
      },
      { timeout: 15_000, interval: 200 },
    )
    const chain = otlp.ancestry(resolve as ReceivedSpan)
    const services = chain.map((sp) => sp.service)
    // prompts' server span ← render's call to prompts ← render's server span ← the gateway's server span
    // (one span a proxied request there, naming its upstream).
    expect(services[0]).toBe('prompts')
    expect(services).toContain('render')
    expect(services.at(-1)).toBe('gateway')
    expect(chain.at(-1)?.kind).toBe(SERVER)
    expect(chain.at(-1)?.parentSpanId).toBe('')
    expect(names(chain)).toEqual(expect.arrayContaining(['render:render.prompts']))
    expect(chain.filter((sp) => sp.service === 'gateway')).toHaveLength(1)
    expect(chain.at(-1)?.attributes['pm.upstream']).toBe('render')
    expect(chain.at(-2)?.service).toBe('render')
    // The gateway's own steps that wait on another process are in the same trace: the new key
    // asked of identity, the limits kept in Redis.
    const trace = otlp.trace(chain[0]?.traceId ?? '')
    expect(names(trace)).toEqual(
      expect.arrayContaining(['gateway:gateway.identity.resolveKey', 'gateway:gateway.limits.consume']),
    )
    // And the prompts service's store call.
    expect(trace.some((sp) => sp.service === 'prompts' && sp.name.startsWith('prompts.store.'))).toBe(true)

    // The same invoke again: the caches answer the key and the prompt, so neither identity nor
    // prompts is asked, and no span stands for a lookup done in memory.
    const again = await call(stack.gateway, 'POST', `/api/v1/prompts/${promptId}/invoke`, {
      token: key,
      body: { variables: { name: 'Ada' } },
    })
    expect(again.status).toBe(200)
    const firstTrace = chain[0]?.traceId
    let second: ReceivedSpan[] = []
    await vi.waitFor(
      () => {
        const root = otlp.spans.find(
          (sp) =>
            sp.service === 'gateway' &&
            sp.kind === SERVER &&
            sp.attributes['http.route'] === '/api/v1/prompts/:id/invoke' &&
            sp.traceId !== firstTrace,
        )
        expect(root).toBeDefined()
        second = otlp.trace(root?.traceId ?? '')
        // render's server span ends after any call it made: once it is here, so is that call's.
        expect(second.some((sp) => sp.service === 'render' && sp.kind === SERVER)).toBe(true)
      },
      { timeout: 15_000, interval: 200 },
    )
    const secondNames = names(second)
    // render's server span is the child of the gateway's one span for the request.
    const secondRoot = second.filter((sp) => sp.service === 'gateway' && sp.kind === SERVER)
    expect(secondRoot).toHaveLength(1)
    expect(second.find((sp) => sp.service === 'render' && sp.kind === SERVER)?.parentSpanId).toBe(
      secondRoot[0]?.spanId,
    )
    expect(secondNames.filter((n) => n.includes('gateway.proxy'))).toEqual([])
    expect(secondNames.filter((n) => n.includes('identity') || n.includes('render.prompts'))).toEqual([])
    expect(second.some((sp) => sp.service === 'prompts')).toBe(false)
  }, 60_000)

  it('publish: gateway → prompts → NATS → webhooks in one trace', async () => {
    const promptId = await createPrompt(stack.gateway, s, `Traced publish ${newId()}`)
    await createWebhook(stack.gateway, s, `${hooks.base}/traced`)
    await publishVersion(stack.gateway, s, promptId)

    let consume: ReceivedSpan | undefined
    await vi.waitFor(
      () => {
        const root = gatewaySpan('/api/v1/prompts/:id/publish', 'POST')
        expect(root).toBeDefined()
        const trace = otlp.trace(root?.traceId ?? '')
        consume = trace.find((sp) => sp.service === 'webhooks' && sp.kind === CONSUMER)
        expect(consume, names(trace).join('\n')).toBeDefined()
        expect(otlp.ancestry(consume as ReceivedSpan).at(-1)?.spanId).toBe(root?.spanId)
      },
      { timeout: 20_000, interval: 200 },
    )
    const chain = otlp.ancestry(consume as ReceivedSpan)
    expect(chain[0]?.name).toBe('consume pm.events.version.published')
    // The consumer's parent is the producer span, sent in the NATS message's traceparent header.
    expect(chain[1]?.service).toBe('prompts')
    expect(chain[1]?.kind).toBe(PRODUCER)
    expect(chain[1]?.name).toBe('publish pm.events.version.published')
    expect(chain[1]?.attributes['messaging.system']).toBe('nats')
    // ... whose parent is the prompts service's publish (its store call wrote the outbox row).
    expect(names(chain)).toEqual(expect.arrayContaining(['prompts:prompts.store.publish']))
    expect(chain.some((sp) => sp.service === 'prompts' && sp.kind === SERVER)).toBe(true)
    expect(chain.at(-1)?.service).toBe('gateway')
    expect(chain.at(-1)?.attributes['http.route']).toBe('/api/v1/prompts/:id/publish')

    // The webhooks service's work for the event (its deliveries written) is under the consumer span.
    await vi.waitFor(
      () => {
        const trace = otlp.trace(chain[0]?.traceId ?? '')
        expect(trace.some((sp) => sp.service === 'webhooks' && sp.name.startsWith('webhooks.store.'))).toBe(
          true,
        )
      },
      { timeout: 15_000, interval: 200 },
    )
    // Each delivery attempt of the worker is a trace of its own (the worker runs in no event's
    // context), so it is looked for by name.
    await vi.waitFor(() => expect(otlp.spans.some((sp) => sp.name === 'webhooks.deliver')).toBe(true), {
      timeout: 15_000,
      interval: 200,
    })
    // OTLP's default encoding, protobuf (OTEL_EXPORTER_OTLP_PROTOCOL unset).
    expect([...otlp.contentTypes]).toEqual(['application/x-protobuf'])
  }, 60_000)
})
