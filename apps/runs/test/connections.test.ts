import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { CreateConnectionRequest, UpdateConnectionRequest } from '@pm/contracts'
import { SecretBox } from '@pm/kit'
import { Value } from '@sinclair/typebox/value'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { Connections, toConnection } from '../src/services/connections.ts'
import { Egress } from '../src/services/egress.ts'
import { SqliteRunStore } from '../src/store/sqlite.ts'

const ORG = 'a'.repeat(24)
const OTHER = 'b'.repeat(24)
const dir = mkdtempSync(join(tmpdir(), 'pm-runs-connections-'))
const store = new SqliteRunStore(join(dir, 'runs.db'))
const egress = new Egress('127.0.0.1', 1_000)
afterAll(async () => {
  await egress.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

describe('opening a connection for a call', () => {
  it('opens the sealed key once per revision, and reads the record every time', async () => {
    const secrets = new SecretBox(randomBytes(32))
    const opens = vi.spyOn(secrets, 'open')
    const reads = vi.spyOn(store, 'getConnection')
    const connections = new Connections({ store, secrets, egress, maxPerOrganization: 5 })
    const c = await connections.create(ORG, {
      name: 'local',
      provider: 'openai-compatible',
      baseUrl: 'http://127.0.0.1:9/v1',
      apiKey: 'sk-first-0001',
      headers: { 'x-team': 'alpha' },
    })
    for (let i = 0; i < 3; i++) {
      const open = await connections.open(ORG, c._id)
      expect(open).toMatchObject({ apiKey: 'sk-first-0001', headers: { 'x-team': 'alpha' } })
    }
    expect(reads).toHaveBeenCalledTimes(3)
    expect(opens).toHaveBeenCalledTimes(2) // the key and the headers, once

    // Another organization never gets it, opened or not.
    await expect(connections.open(OTHER, c._id)).rejects.toMatchObject({ code: 'NOT_FOUND' })

    // A new key counts on the next call.
    await connections.update(ORG, c._id, { apiKey: 'sk-second-0002' })
    expect((await connections.open(ORG, c._id)).apiKey).toBe('sk-second-0002')
    expect(opens).toHaveBeenCalledTimes(4)

    // So does a change made by another replica (another Connections on the same store).
    const replica = new Connections({ store, secrets, egress, maxPerOrganization: 5 })
    await replica.update(ORG, c._id, { apiKey: 'sk-third-0003', headers: {} })
    expect(await connections.open(ORG, c._id)).toMatchObject({ apiKey: 'sk-third-0003', headers: {} })

    // And a deletion by the replica.
    await replica.remove(ORG, c._id)
    await expect(connections.open(ORG, c._id)).rejects.toMatchObject({ code: 'NOT_FOUND' })
  })
})

describe('extra headers in a request', () => {
  it('take HTTP token names only: another name is refused, not stored unchecked', () => {
    for (const schema of [CreateConnectionRequest, UpdateConnectionRequest]) {
      const headersSchema = schema.properties.headers
      expect(Value.Check(headersSchema, { 'x-team': 'alpha', 'api-version': '2024-10-21' })).toBe(true)
      // A run sent them as headers, and read each value as a string (a number was a 500).
      for (const headers of [{ '': 'x' }, { 'a\u0000': 'x' }, { 'a b': 'x' }, { ['x'.repeat(101)]: 1 }])
        expect(Value.Check(headersSchema, headers), JSON.stringify(headers)).toBe(false)
    }
  })
})

describe('the key hint', () => {
  it('shows the last 4 characters of a long key only, never most or all of a short one', async () => {
    const connections = new Connections({
      store,
      secrets: new SecretBox(randomBytes(32)),
      egress,
      maxPerOrganization: 5,
    })
    const c = await connections.create(OTHER, {
      name: 'long',
      provider: 'openai',
      apiKey: 'sk-proj-abcdefgh-9f3k',
    })
    expect(c.keyHint).toBe('9f3k')
    for (const apiKey of ['abcd', 'x', 'ollama', 'sk-0123456789ab']) {
      expect((await connections.update(OTHER, c._id, { apiKey })).keyHint).toBe('')
    }
    const short = await connections.create(OTHER, { name: 'short', provider: 'openai', apiKey: 'abc' })
    expect(short.keyHint).toBe('')
    expect(JSON.stringify(await connections.list(OTHER))).not.toMatch(/abc"|ollama/)
  })

  it('does not answer a hint stored before that is a whole short key', () => {
    const now = new Date().toISOString()
    const record = {
      _id: 'e'.repeat(24),
      organizationId: OTHER,
      name: 'old',
      provider: 'openai' as const,
      baseUrl: null,
      sealedKey: 'enc:v1:x',
      keyHint: 'k9',
      models: [],
      sealedHeaders: null,
      headerNames: [],
      createdAt: now,
      updatedAt: now,
    }
    expect(toConnection(record).keyHint).toBe('')
    expect(toConnection({ ...record, keyHint: 'x9Qa' }).keyHint).toBe('x9Qa')
  })
})

describe('the bound on connections (RUN_MAX_CONNECTIONS)', () => {
  it('holds for creates at once: exactly the bound stored, the others refused with 409', async () => {
    const org = 'f'.repeat(24)
    const connections = new Connections({
      store,
      secrets: new SecretBox(randomBytes(32)),
      egress,
      maxPerOrganization: 3,
    })
    const outcomes = await Promise.allSettled(
      Array.from({ length: 20 }, (_, i) =>
        connections.create(org, { name: `c${i}`, provider: 'openai', apiKey: 'sk-0123456789abcdef' }),
      ),
    )
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(3)
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason] : []))
    expect(refused).toHaveLength(17)
    for (const err of refused) expect(err).toMatchObject({ code: 'CONFLICT' })
    expect(await connections.list(org)).toHaveLength(3)
  })
})
