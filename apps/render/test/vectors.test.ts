import { readFileSync } from 'node:fs'
import { MemoryBus } from '@pm/bus'
import { type ChatMessage, CONTEXT_HEADER, type Variable } from '@pm/contracts'
import { type Service, signContext } from '@pm/kit'
import { chatTemplate } from '@pm/template'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadRenderConfig } from '../src/app.ts'
import { FakePrompts, hexId } from './fakePrompts.ts'

const SECRET = 'render-vectors-secret-0123456789abcdef0123456789'
const ORG = hexId()

interface Vector {
  name: string
  template?: string
  messages?: ChatMessage[]
  variables: Variable[]
  values: Record<string, unknown>
  expected?: { renderedContent: string; renderedMessages?: unknown[] }
  /** `status` 400 unless given; `details` compared whole when given, `names` otherwise. */
  error?: { code: string; status?: number; names?: string[]; details?: unknown }
}

/** The vectors the TypeScript and Python clients render locally, through the service's invoke. */
const VECTORS = (
  JSON.parse(
    readFileSync(new URL('../../../packages/template/vectors/render.json', import.meta.url), 'utf8'),
  ) as { cases: Vector[] }
).cases

describe('invoke renders the shared vectors (packages/template/vectors/render.json)', () => {
  let fake: FakePrompts
  let bus: MemoryBus
  let app: Service

  beforeAll(async () => {
    fake = new FakePrompts(SECRET)
    const promptsUrl = await fake.start()
    bus = new MemoryBus()
    app = await buildApp({
      config: loadRenderConfig({
        INTERNAL_AUTH_SECRET: SECRET,
        PROMPTS_URL: promptsUrl,
        LOG_LEVEL: 'silent',
      }),
      bus,
    })
  })
  afterAll(async () => {
    await app.close()
    await bus.close()
    await fake.close()
  })

  it.each(VECTORS.map((v) => [v.name, v] as const))('%s', async (_name, v) => {
    const p = fake.add(ORG, v.template ?? chatTemplate(v.messages ?? []), v.variables)
    if (v.messages) p.draft.messages = v.messages
    fake.publish(p._id)
    const res = await app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/invoke`,
      headers: {
        [CONTEXT_HEADER]: signContext(
          { kind: 'apiKey', organizationId: ORG, scopes: ['prompts:read'], requestId: 'r' },
          SECRET,
        ),
      },
      payload: { variables: v.values },
    })
    const body = res.json() as {
      renderedContent?: string
      renderedMessages?: unknown[]
      error?: { code: string; details: unknown }
    }
    if (v.expected) {
      expect(res.statusCode).toBe(200)
      expect(body.renderedContent).toBe(v.expected.renderedContent)
      expect(body.renderedMessages).toEqual(v.expected.renderedMessages)
      return
    }
    expect(res.statusCode).toBe(v.error?.status ?? 400)
    expect(body.error?.code).toBe(v.error?.code)
    if (v.error?.details !== undefined) {
      expect(body.error?.details).toEqual(v.error.details)
      return
    }
    const names =
      body.error?.code === 'VALIDATION_ERROR'
        ? (body.error.details as { path: string }[]).map((d) => d.path.replace('/body/variables/', ''))
        : body.error?.details
    expect(names).toEqual(v.error?.names)
  })
})
