import { randomBytes } from 'node:crypto'
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { MemoryBus } from '@pm/bus'
import { type CallerContext, CONTEXT_HEADER, type CreatedWebhook } from '@pm/contracts'
import { loadSecretBox, newId, SecretBox, signContext } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { describe, expect, it, vi } from 'vitest'
import { buildApp, loadWebhooksConfig } from '../src/app.ts'
import { generateSecret } from '../src/domain/signature.ts'
import { SqliteWebhookStore } from '../src/store/sqlite.ts'
import { DeliveryWorker } from '../src/worker.ts'

const INTERNAL = randomBytes(32).toString('hex')
const newKey = () => SecretBox.generateKey().toString('base64')
const tempDir = () => mkdtempSync(join(tmpdir(), 'pm-webhooks-secrets-'))

function start(dataDir: string, env: Record<string, string> = {}) {
  const config = loadWebhooksConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    INTERNAL_AUTH_SECRET: INTERNAL,
    DATA_DIR: dataDir,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    ...env,
  })
  return buildApp({ config, bus: new MemoryBus(20) })
}

async function createWebhook(dataDir: string, env: Record<string, string> = {}): Promise<CreatedWebhook> {
  const app = await start(dataDir, env)
  try {
    await app.ready()
    const org = newId()
    const context: CallerContext = {
      kind: 'user',
      userId: newId(),
      organizationId: org,
      role: 'ADMIN',
      scopes: ['organization:read', 'organization:write'],
      requestId: 'test',
    }
    const res = await app.inject({
      method: 'POST',
      url: `/api/v1/organizations/${org}/webhooks`,
      headers: { [CONTEXT_HEADER]: signContext(context, INTERNAL) },
      payload: { url: 'http://127.0.0.1:9/in' },
    })
    expect(res.statusCode).toBe(201)
    return res.json() as CreatedWebhook
  } finally {
    await app.close()
  }
}

/** The stored secret of each subscription, read straight from webhooks.db. */
function stored(dataDir: string): Map<string, string> {
  const db = new DatabaseSync(join(dataDir, 'webhooks.db'), { readOnly: true })
  try {
    const rows = db.prepare('SELECT id, secret FROM subscriptions').all()
    return new Map(rows.map((r) => [String(r.id), String(r.secret)]))
  } finally {
    db.close()
  }
}

/** Whether `text` (or the key bytes inside a whsec_ secret) appears in the store's files. */
function onDisk(dataDir: string, secret: string): boolean {
  const needles = [Buffer.from(secret), Buffer.from(secret.slice('whsec_'.length), 'base64')]
  return ['webhooks.db', 'webhooks.db-wal'].some((name) => {
    const file = join(dataDir, name)
    if (!existsSync(file)) return false
    const bytes = readFileSync(file)
    return needles.some((n) => bytes.includes(n))
  })
}

describe('signing secrets at rest', () => {
  it('stores a new secret sealed: its bytes are in neither webhooks.db nor its WAL', async () => {
    const dir = tempDir()
    const { webhook, secret } = await createWebhook(dir)
    const value = stored(dir).get(webhook._id) ?? ''
    expect(SecretBox.isSealed(value)).toBe(true)
    expect(onDisk(dir, secret)).toBe(false)
    // It opens with the generated key file, bound to its subscription and to no other.
    const box = loadSecretBox({ DATA_DIR: dir })
    expect(box.open(value, webhook._id)).toBe(secret)
    expect(() => box.open(value, newId())).toThrow(/does not open/)
  })

  it('seals clear secrets from before on start, leaving no clear copy in the files', async () => {
    const dir = tempDir()
    const store = new SqliteWebhookStore(join(dir, 'webhooks.db'))
    const secret = generateSecret()
    const id = newId()
    const now = new Date().toISOString()
    await store.createSubscription({
      _id: id,
      organizationId: newId(),
      url: 'https://hooks.example.com/in',
      events: ['version.published'],
      active: true,
      secret,
      createdAt: now,
      updatedAt: now,
      disabledAt: null,
      disabledReason: null,
    })
    await store.close()
    expect(onDisk(dir, secret)).toBe(true)

    const app = await start(dir)
    await app.ready()
    await app.close()
    const value = stored(dir).get(id) ?? ''
    expect(SecretBox.isSealed(value)).toBe(true)
    expect(loadSecretBox({ DATA_DIR: dir }).open(value, id)).toBe(secret)
    expect(onDisk(dir, secret)).toBe(false)
  })

  it('opens a store written before secret rotation: the columns are added, one secret signs', async () => {
    const dir = tempDir()
    const db = new DatabaseSync(join(dir, 'webhooks.db'))
    db.exec(`CREATE TABLE subscriptions (
      id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL,
      active INTEGER NOT NULL, secret TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
      disabled_at TEXT, disabled_reason TEXT)`)
    const id = newId()
    const now = new Date().toISOString()
    db.prepare('INSERT INTO subscriptions VALUES (?, ?, ?, ?, 1, ?, ?, ?, NULL, NULL)').run(
      id,
      newId(),
      'https://hooks.example.com/in',
      '["version.published"]',
      'enc:v1:sealed',
      now,
      now,
    )
    db.close()
    const store = new SqliteWebhookStore(join(dir, 'webhooks.db'))
    try {
      expect(await store.getSubscriptionById(id)).toMatchObject({
        secret: 'enc:v1:sealed',
        previousSecret: null,
        previousSecretExpiresAt: null,
      })
    } finally {
      await store.close()
    }
  })

  it('rotates SECRETS_KEY: the previous key opens until the start re-seals under the new one', async () => {
    const dir = tempDir()
    const [a, b] = [newKey(), newKey()]
    const { webhook, secret } = await createWebhook(dir, { SECRETS_KEY: a })
    const underA = stored(dir).get(webhook._id) ?? ''

    // The new key alone cannot open what the old one sealed: the start is refused, saying why.
    await expect(start(dir, { SECRETS_KEY: b })).rejects.toThrow(
      /neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS/,
    )
    expect(stored(dir).get(webhook._id)).toBe(underA)

    const app = await start(dir, { SECRETS_KEY: b, SECRETS_KEY_PREVIOUS: a })
    await app.close()
    const underB = stored(dir).get(webhook._id) ?? ''
    expect(underB).not.toBe(underA)
    // Re-sealed: b alone now opens it, so the previous key can be dropped.
    expect(loadSecretBox({ SECRETS_KEY: b }).open(underB, webhook._id)).toBe(secret)
    const again = await start(dir, { SECRETS_KEY: b })
    await again.close()
  })

  it('rotates the embedded key file: a new first line seals, the old line below it still opens', async () => {
    const dir = tempDir()
    const { webhook, secret } = await createWebhook(dir)
    const file = join(dir, 'secret.key')
    const old = readFileSync(file, 'utf8').trim()
    const fresh = newKey()
    writeFileSync(file, `${fresh}\n${old}\n`)
    const app = await start(dir)
    await app.close()
    // Sealed under the new first line: the old line can go.
    writeFileSync(file, `${fresh}\n`)
    expect(loadSecretBox({ DATA_DIR: dir }).open(stored(dir).get(webhook._id) ?? '', webhook._id)).toBe(
      secret,
    )
    const again = await start(dir)
    await again.close()
  })

  it('drops a previous secret once its overlap ends, while the worker runs: no copy left in the files', async () => {
    const dir = tempDir()
    const { webhook } = await createWebhook(dir)
    const previous = stored(dir).get(webhook._id) ?? ''
    const box = loadSecretBox({ DATA_DIR: dir })
    const store = new SqliteWebhookStore(join(dir, 'webhooks.db'))
    const quiet = { info: () => {}, error: () => {} } as unknown as FastifyBaseLogger
    const worker = new DeliveryWorker({
      store,
      secrets: box,
      log: quiet,
      allowPrivate: true,
      timeoutMs: 1_000,
      retryScale: 1,
      pollMs: 60_000,
      concurrency: 1,
      secretSweepMs: 50,
    })
    const previousOf = async () => (await store.getSubscriptionById(webhook._id))?.previousSecret
    try {
      // Room for a stalled machine between the rotation and the check that it is still kept.
      const until = new Date(Date.now() + 3_000).toISOString()
      const rotated = await store.rotateSecret(webhook.organizationId, webhook._id, previous, {
        secret: box.seal(generateSecret(), webhook._id),
        previousSecret: previous,
        previousSecretExpiresAt: until,
        updatedAt: new Date().toISOString(),
      })
      expect(rotated?.previousSecret).toBe(previous)
      worker.start()
      // The sweep at start keeps it: it still signs.
      await new Promise((r) => setTimeout(r, 200))
      expect(await previousOf()).toBe(previous)
      await vi.waitFor(async () => expect(await previousOf()).toBeNull(), { timeout: 10_000, interval: 25 })
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(until))
      expect((await store.getSubscriptionById(webhook._id))?.previousSecretExpiresAt).toBeNull()
    } finally {
      await worker.stop()
      await store.close()
    }
    expect(onDisk(dir, previous)).toBe(false)
  })

  it('refuses to start in the distributed mode without SECRETS_KEY, before connecting', async () => {
    await expect(start(tempDir(), { MONGO_URL: 'mongodb://127.0.0.1:1/none' })).rejects.toThrow(
      /SECRETS_KEY: is required with MONGO_URL/,
    )
  })
})
