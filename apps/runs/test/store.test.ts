import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { RunRecord } from '@pm/contracts'
import { afterAll, describe, expect, it } from 'vitest'
import { SqliteRunStore } from '../src/store/sqlite.ts'

const dir = mkdtempSync(join(tmpdir(), 'pm-runs-store-'))
const store = new SqliteRunStore(join(dir, 'runs.db'))
afterAll(async () => {
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

const ORG = 'a'.repeat(24)
const OTHER = 'b'.repeat(24)
const PROMPT = 'c'.repeat(24)

function runAt(id: string, organizationId: string, createdAt: string): RunRecord {
  return {
    _id: id,
    organizationId,
    prompt: { promptId: PROMPT, versionId: null, version: null, draft: true },
    connectionId: 'd'.repeat(24),
    provider: 'openai',
    model: 'm',
    params: {},
    variables: {},
    renderedMessages: [],
    stream: false,
    status: 'succeeded',
    output: { role: 'assistant', content: 'x' },
    finishReason: 'stop',
    usage: { inputTokens: 1, outputTokens: 1 },
    latencyMs: 1,
    timeToFirstTokenMs: 1,
    error: null,
    actor: { kind: 'user', userId: 'u', apiKeyId: null },
    createdAt,
  }
}

describe('SQLite run store', () => {
  it('lists a prompt runs newest first, per organization, and prunes by age', async () => {
    await store.insertRun(runAt('1'.repeat(24), ORG, '2026-01-01T00:00:00.000Z'))
    await store.insertRun(runAt('2'.repeat(24), ORG, '2026-01-02T00:00:00.000Z'))
    await store.insertRun(runAt('3'.repeat(24), OTHER, '2026-01-03T00:00:00.000Z'))
    const page = await store.listRuns(ORG, PROMPT, 1, 10)
    expect(page.total).toBe(2)
    expect(page.items.map((r) => r._id)).toEqual(['2'.repeat(24), '1'.repeat(24)])
    expect(await store.getRun(OTHER, '1'.repeat(24))).toBeNull()
    expect(await store.deleteRunsBefore('2026-01-02T00:00:00.000Z')).toBe(1)
    expect((await store.listRuns(ORG, PROMPT, 1, 10)).total).toBe(1)
  })

  it('updates and deletes a connection only in its organization', async () => {
    const now = new Date().toISOString()
    const c = {
      _id: 'e'.repeat(24),
      organizationId: ORG,
      name: 'n',
      provider: 'anthropic' as const,
      baseUrl: null,
      sealedKey: 'enc:v1:x',
      keyHint: 'abcd',
      models: ['m'],
      sealedHeaders: null,
      headerNames: [],
      createdAt: now,
      updatedAt: now,
    }
    expect(await store.insertConnection(c, 10)).toBe(true)
    expect(await store.updateConnection(OTHER, c._id, { name: 'x', updatedAt: now })).toBeNull()
    expect(await store.updateConnection(ORG, c._id, { name: 'x', models: [], updatedAt: now })).toMatchObject(
      { name: 'x', models: [] },
    )
    expect(await store.deleteConnection(OTHER, c._id)).toBe(false)
    expect(await store.deleteConnection(ORG, c._id)).toBe(true)
  })
})
