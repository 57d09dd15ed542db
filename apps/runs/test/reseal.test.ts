import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { loadSecretBox, newId, SecretBox } from '@pm/kit'
import { afterAll, describe, expect, it } from 'vitest'
import { buildApp, loadRunsConfig } from '../src/app.ts'
import { SqliteRunStore } from '../src/store/sqlite.ts'

const newKey = () => SecretBox.generateKey().toString('base64')

/**
 * SECRETS_KEY's rotation (docs/operations.md): a start with the new key and the old one as
 * SECRETS_KEY_PREVIOUS seals every provider key and header set again under the new key, so the
 * old one can be dropped. Before, runs never re-sealed: dropping the old key broke every
 * connection made before the rotation.
 */
describe('rotating SECRETS_KEY in runs', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pm-runs-reseal-'))
  afterAll(() => rmSync(dir, { recursive: true, force: true }))

  const start = async (env: Record<string, string>) => {
    const bus = new MemoryBus()
    const app = await buildApp({
      config: loadRunsConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
        DATA_DIR: dir,
        ...env,
      }),
      bus,
    })
    await app.ready()
    return async () => {
      await app.close()
      await bus.close()
    }
  }

  it('re-seals provider keys and headers under the new key at start; the old key can then go', async () => {
    const [a, b] = [newKey(), newKey()]
    const id = newId()
    const org = newId()
    const underA = loadSecretBox({ SECRETS_KEY: a })
    const store = new SqliteRunStore(join(dir, 'runs.db'))
    const now = new Date().toISOString()
    await store.insertConnection(
      {
        _id: id,
        organizationId: org,
        name: 'openai',
        provider: 'openai',
        baseUrl: null,
        sealedKey: underA.seal('sk-live-0123456789abcdef', id),
        keyHint: 'cdef',
        models: ['gpt-4o-mini'],
        sealedHeaders: underA.seal(JSON.stringify({ 'api-key': 'azure-secret' }), id),
        headerNames: ['api-key'],
        createdAt: now,
        updatedAt: now,
      },
      50,
    )
    await store.close()

    // The new key alone cannot open them: the start says so instead of every run failing later.
    await expect(start({ SECRETS_KEY: b })).rejects.toThrow(/SECRETS_KEY/)

    await (await start({ SECRETS_KEY: b, SECRETS_KEY_PREVIOUS: a }))()

    const reopened = new SqliteRunStore(join(dir, 'runs.db'))
    try {
      const row = await reopened.getConnection(org, id)
      const onlyB = loadSecretBox({ SECRETS_KEY: b })
      expect(onlyB.open(row?.sealedKey ?? '', id)).toBe('sk-live-0123456789abcdef')
      expect(JSON.parse(onlyB.open(row?.sealedHeaders ?? '', id))).toEqual({ 'api-key': 'azure-secret' })
    } finally {
      await reopened.close()
    }
    // And a start with the new key alone now works.
    await (await start({ SECRETS_KEY: b }))()
  })
})
