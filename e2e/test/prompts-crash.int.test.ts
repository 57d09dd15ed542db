import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import type { NatsBus } from '@pm/bus'
import type { EnvironmentPromotedEvent, Prompt, PromptVersion, VersionPublishedEvent } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Caller, caller, data, login, type Session, type Tapped, tapEvents } from '../src/prompts.ts'
import { type Stack, startStack } from '../src/stack.ts'

/**
 * How long the relay holds an event back: the window in which the test makes its changes and
 * kills the process. A minute, far longer than any test's steps: 5 s once did not cover two
 * changes and two kills on a slow, loaded machine (the first change's entry went out 5.05 s
 * after it, before the kill). No test waits it out: each kill is followed by a restart that sends
 * at once (SEND).
 */
const RELAY_DELAY_MS = 60_000
/** A process that holds its events (outbox and audit) back for RELAY_DELAY_MS: the crash window. */
const HOLD = { OUTBOX_RELAY_DELAY_MS: String(RELAY_DELAY_MS), AUDIT_RELAY_DELAY_MS: String(RELAY_DELAY_MS) }
/** The most a restarted process that sends at once takes to send what it held (a bound, not a wait). */
const SENT_WITHIN_MS = 25_000
/**
 * A process that sends at once (the default): a restart after the kill uses it, so that the test
 * sees the recovered events as soon as the process is up instead of waiting out the window.
 */
const SEND = { OUTBOX_RELAY_DELAY_MS: '0', AUDIT_RELAY_DELAY_MS: '0' }

/**
 * The outbox promise of DESIGN section 6: a crash between storing a publish and sending its
 * event loses nothing, and a send repeated after a crash is not delivered twice. The prompts
 * process is killed with SIGKILL (no shutdown hooks) and restarted; a JetStream consumer
 * counts the messages carrying the version's id.
 */
describe('version.published survives a crash of the prompts process', () => {
  let stack: Stack
  let admin: Session
  let user: Caller
  let tap: { received: Tapped[]; bus: NatsBus }

  const withId = (msgId: string) => tap.received.filter((m) => m.msgId === msgId)

  /** Whether each restartable process holds its events back now (the stack starts them holding). */
  const holding: Record<string, boolean> = { prompts: true, identity: true, webhooks: true }
  /** Restarts a process (after a kill, or a running one) holding its events back or sending at once. */
  async function restart(name: string, hold: boolean): Promise<void> {
    await stack.restart(name, hold ? HOLD : SEND)
    holding[name] = hold
  }
  /** Each test says how it wants the processes; one left otherwise by an earlier test is restarted. */
  async function ensure(hold: boolean, ...names: string[]): Promise<void> {
    await Promise.all(names.filter((n) => holding[n] !== hold).map((n) => restart(n, hold)))
  }

  /** The outbox row of a version, read straight from the prompts database (process stopped). */
  function outboxRow(versionId: string): { sent_at: string | null } | undefined {
    const db = new DatabaseSync(join(stack.dataDir, 'prompts.db'))
    try {
      return db.prepare('SELECT sent_at FROM outbox WHERE msg_id = ?').get(versionId) as
        | { sent_at: string | null }
        | undefined
    } finally {
      db.close()
    }
  }

  /**
   * Waits until everything published to the stream before now has reached the tap: a marker
   * published now arrives after any message stored before it (one consumer, stream order).
   */
  async function drainTap(): Promise<void> {
    const marker = newId()
    await tap.bus.publishDurable(`pm.events.e2e.marker.${marker}`, { marker }, marker)
    await vi.waitFor(() => expect(withId(marker)).toHaveLength(1), { timeout: 10_000, interval: 20 })
  }

  beforeAll(async () => {
    stack = await startStack({
      ...HOLD,
      // A durable consumer of its own: another stack on the same NATS must not take this one's entries.
      AUDIT_CONSUMER: `prompts-audit-e2e-${newId()}`,
    })
    admin = await login(stack.gateway)
    user = caller(stack.gateway, admin.token)
    tap = await tapEvents()
  }, 120_000)

  afterAll(async () => {
    await tap?.bus.close()
    await stack?.stop()
  })

  it('sends the event exactly once after SIGKILL between the store write and the send', async () => {
    await ensure(true, 'prompts')
    const prompt = data<Prompt>(
      await user('POST', '/api/v1/prompts', { name: 'Crash test', template: 'Hello {{name}}' }),
      201,
    )
    const version = data<PromptVersion>(
      await user('POST', `/api/v1/prompts/${prompt._id}/publish`, { changeLog: 'before the crash' }),
      201,
    )
    await stack.processes.prompts?.kill()

    // The publish is stored with its event, and the event was not sent: the crash window.
    expect(outboxRow(version._id)).toEqual({ sent_at: null })
    await drainTap()
    expect(withId(version._id)).toEqual([])

    await restart('prompts', false)
    await vi.waitFor(() => expect(withId(version._id)).toHaveLength(1), {
      timeout: SENT_WITHIN_MS,
      interval: 50,
    })
    const event = withId(version._id)[0]?.data as VersionPublishedEvent
    expect(event).toMatchObject({
      type: 'version.published',
      organizationId: admin.organizationId,
      data: { promptId: prompt._id, versionId: version._id, version: 1, changeLog: 'before the crash' },
    })
    // The relay marked it sent; nothing else with that id is on its way.
    await vi.waitFor(() => expect(outboxRow(version._id)?.sent_at).not.toBeNull(), { timeout: 10_000 })
    await drainTap()
    expect(withId(version._id)).toHaveLength(1)

    // The version itself survived the crash intact.
    expect(
      data<PromptVersion>(await user('GET', `/api/v1/prompts/${prompt._id}/versions/${version._id}`)),
    ).toEqual(version)
  }, 90_000)

  /** The outbox rows of a prompt's events of one subject (process stopped or not: WAL readers are fine). */
  function outboxRowsOf(subject: string, promptId: string): { msg_id: string; sent_at: string | null }[] {
    const db = new DatabaseSync(join(stack.dataDir, 'prompts.db'))
    try {
      return (
        db.prepare('SELECT msg_id, sent_at, payload FROM outbox WHERE subject = ?').all(subject) as {
          msg_id: string
          sent_at: string | null
          payload: string
        }[]
      )
        .filter((r) => (JSON.parse(r.payload) as { data: { promptId: string } }).data.promptId === promptId)
        .map(({ msg_id, sent_at }) => ({ msg_id, sent_at }))
    } finally {
      db.close()
    }
  }

  it('sends environment.promoted exactly once after SIGKILL between writing the promote and sending', async () => {
    await ensure(true, 'prompts')
    const prompt = data<Prompt>(
      await user('POST', '/api/v1/prompts', {
        name: 'Crash promote',
        type: 'chat',
        messages: [{ role: 'user', content: 'Hi {{name}}' }],
      }),
      201,
    )
    const version = data<PromptVersion>(await user('POST', `/api/v1/prompts/${prompt._id}/publish`, {}), 201)
    await stack.processes.prompts?.kill()
    await restart('prompts', false)
    // Let the publish's own event go out first, so that the kill below hits the promote's only.
    await vi.waitFor(() => expect(withId(version._id)).toHaveLength(1), {
      timeout: SENT_WITHIN_MS,
      interval: 50,
    })
    await restart('prompts', true)
    const pin = data<{ versionId: string; promotedAt: string }>(
      await user('POST', `/api/v1/prompts/${prompt._id}/environments/production/promote`, {
        versionId: version._id,
      }),
    )
    await stack.processes.prompts?.kill()

    // The pin and its event were written together, and the event was not sent.
    const rows = outboxRowsOf('pm.events.environment.promoted', prompt._id)
    expect(rows).toEqual([{ msg_id: expect.any(String), sent_at: null }])
    const msgId = rows[0]?.msg_id ?? ''
    await drainTap()
    expect(withId(msgId)).toEqual([])

    await restart('prompts', false)
    await vi.waitFor(() => expect(withId(msgId)).toHaveLength(1), {
      timeout: SENT_WITHIN_MS,
      interval: 50,
    })
    expect(withId(msgId)[0]?.data as EnvironmentPromotedEvent).toMatchObject({
      id: msgId,
      type: 'environment.promoted',
      organizationId: admin.organizationId,
      data: {
        promptId: prompt._id,
        slug: prompt.slug,
        environment: 'production',
        versionId: version._id,
        version: 1,
      },
    })
    await vi.waitFor(
      () => expect(outboxRowsOf('pm.events.environment.promoted', prompt._id)[0]?.sent_at).not.toBeNull(),
      { timeout: 10_000 },
    )

    // A send repeated after a crash (row unmarked again) is dropped as a duplicate.
    await stack.processes.prompts?.kill()
    const db = new DatabaseSync(join(stack.dataDir, 'prompts.db'))
    try {
      db.prepare('UPDATE outbox SET sent_at = NULL WHERE msg_id = ?').run(msgId)
    } finally {
      db.close()
    }
    await restart('prompts', false)
    await vi.waitFor(
      () => expect(outboxRowsOf('pm.events.environment.promoted', prompt._id)[0]?.sent_at).not.toBeNull(),
      { timeout: SENT_WITHIN_MS, interval: 50 },
    )
    await drainTap()
    expect(withId(msgId)).toHaveLength(1)
    // The pin survived the crash.
    const environments = data<{ production: { versionId: string; promotedAt: string } | null }>(
      await user('GET', `/api/v1/prompts/${prompt._id}/environments`),
    )
    expect(environments.production).toMatchObject({ versionId: version._id, promotedAt: pin.promotedAt })
    // Four restarts of the prompts process: longer than the default test timeout.
  }, 90_000)

  it('loses no audit entry to a SIGKILL between the change and its copy into the audit log (issue 29)', async () => {
    await ensure(true, 'prompts')
    const prompt = data<Prompt>(
      await user('POST', '/api/v1/prompts', { name: 'Crash audit', template: 'Hi {{name}}' }),
      201,
    )
    await stack.processes.prompts?.kill()
    // The entry was written with the prompt, as an outbox row not yet copied into the log.
    const db = new DatabaseSync(join(stack.dataDir, 'prompts.db'))
    try {
      const pending = (
        db.prepare("SELECT payload, sent_at FROM outbox WHERE subject = 'pm.audit.entry'").all() as {
          payload: string
          sent_at: string | null
        }[]
      ).filter((r) => (JSON.parse(r.payload) as { resource: { id: string } }).resource.id === prompt._id)
      expect(pending.map((r) => r.sent_at)).toEqual([null])
      expect(db.prepare('SELECT COUNT(*) AS n FROM audit_log WHERE resource_id = ?').get(prompt._id)).toEqual(
        { n: 0 },
      )
    } finally {
      db.close()
    }
    await restart('prompts', false)
    const path = `/api/v1/organizations/${admin.organizationId}/audit-log?resourceId=${prompt._id}`
    await vi.waitFor(
      async () => {
        const log = data<{ entries: { action: string; actor: { type: string; id: string } }[] }>(
          await user('GET', path),
        )
        expect(log.entries.map((e) => e.action)).toEqual(['prompt.created'])
      },
      { timeout: SENT_WITHIN_MS, interval: 100 },
    )
    // Copied once: a second pass (the row now sent) adds nothing.
    await new Promise((r) => setTimeout(r, 300))
    const again = data<{ entries: { actor: { type: string } }[] }>(await user('GET', path))
    expect(again.entries).toHaveLength(1)
    expect(again.entries[0]?.actor.type).toBe('user')
  }, 60_000)

  it("records identity's and webhooks' changes too, naming the actor, and nothing for a refused request (issue 29)", async () => {
    // Nothing is killed here: processes that send at once.
    await ensure(false, 'identity', 'webhooks')
    const org = admin.organizationId
    const members = data<{ members: { userId: string; name: string }[] }>(
      await user('GET', `/api/v1/organizations/${org}/members`),
    )
    const adminName = members.members.find((m) => m.userId === admin.userId)?.name
    expect(adminName).toBeTruthy()
    // Refused by validation at identity and at webhooks: no entry.
    expect(
      (await user('POST', `/api/v1/organizations/${org}/api-keys`, { name: '', scopes: ['nope'] })).status,
    ).toBe(400)
    const created = data<{ key: string; apiKey: { _id: string } }>(
      await user('POST', `/api/v1/organizations/${org}/api-keys`, {
        name: 'Deploy key',
        scopes: ['organization:write'],
      }),
      201,
    )
    const asKey = caller(stack.gateway, created.key)
    expect(
      (await asKey('POST', `/api/v1/organizations/${org}/webhooks`, { url: 'ftp://example.com' })).status,
    ).toBe(400)
    const hook = data<{ webhook: { _id: string } }>(
      await asKey('POST', `/api/v1/organizations/${org}/webhooks`, { url: 'http://127.0.0.1:9/audited' }),
      201,
    )

    type Log = { entries: { action: string; actor: { type: string; id: string; name: string } }[] }
    const log = (query: string) => user('GET', `/api/v1/organizations/${org}/audit-log?${query}`)
    await vi.waitFor(
      async () => {
        expect(data<Log>(await log('action=apiKey.created')).entries).toHaveLength(1)
        expect(data<Log>(await log('action=webhook.created')).entries).toHaveLength(1)
      },
      { timeout: 20_000, interval: 100 },
    )
    // Relayed over JetStream from identity and webhooks; exactly one each (the refused ones left none).
    const keyEntries = data<Log>(await log('action=apiKey.created')).entries
    expect(keyEntries).toEqual([
      expect.objectContaining({ actor: { type: 'user', id: admin.userId, name: adminName } }),
    ])
    expect(data<Log>(await log(`action=webhook.created&resourceId=${hook.webhook._id}`)).entries).toEqual([
      expect.objectContaining({ actor: { type: 'apiKey', id: created.apiKey._id, name: 'Deploy key' } }),
    ])
    // The admin's sign-in (beforeAll) is there too, under the admin's name.
    const signIns = data<Log>(await log(`action=user.signed_in&actor=${admin.userId}`)).entries
    expect(signIns.length).toBeGreaterThanOrEqual(1)
    expect(signIns[0]?.actor.name).toBe(adminName)
  }, 40_000)

  it(
    'loses no audit entry of identity or webhooks when each is killed between its change and the relay (issue 29)',
    async () => {
      await ensure(true, 'identity', 'webhooks')
      const org = admin.organizationId
      const key = data<{ apiKey: { _id: string } }>(
        await user('POST', `/api/v1/organizations/${org}/api-keys`, {
          name: 'Crash key',
          scopes: ['prompts:read'],
        }),
        201,
      )
      const hook = data<{ webhook: { _id: string } }>(
        await user('POST', `/api/v1/organizations/${org}/webhooks`, { url: 'http://127.0.0.1:9/crash' }),
        201,
      )
      // Within the relay delay: both entries are committed with their changes and not yet sent.
      await Promise.all([stack.processes.identity?.kill(), stack.processes.webhooks?.kill()])
      const pending = (file: string, resourceId: string) => {
        const db = new DatabaseSync(join(stack.dataDir, file))
        try {
          return (
            db.prepare('SELECT payload, sent_at FROM audit_outbox').all() as {
              payload: string
              sent_at: string | null
            }[]
          ).filter((r) => (JSON.parse(r.payload) as { resource: { id: string } }).resource.id === resourceId)
        } finally {
          db.close()
        }
      }
      expect(pending('identity.db', key.apiKey._id)).toEqual([expect.objectContaining({ sent_at: null })])
      expect(pending('webhooks.db', hook.webhook._id)).toEqual([expect.objectContaining({ sent_at: null })])

      await Promise.all([restart('identity', false), restart('webhooks', false)])
      type Log = { entries: { action: string; resource: { id: string } }[] }
      const entriesFor = async (resourceId: string) =>
        data<Log>(await user('GET', `/api/v1/organizations/${org}/audit-log?resourceId=${resourceId}`))
          .entries
      await vi.waitFor(
        async () => {
          expect((await entriesFor(key.apiKey._id)).map((e) => e.action)).toEqual(['apiKey.created'])
          expect((await entriesFor(hook.webhook._id)).map((e) => e.action)).toEqual(['webhook.created'])
        },
        { timeout: SENT_WITHIN_MS, interval: 200 },
      )
      expect(pending('identity.db', key.apiKey._id)[0]?.sent_at).not.toBeNull()
    },
    SENT_WITHIN_MS + 40_000,
  )

  it('does not deliver twice when the crash comes after the send but before it is marked sent', async () => {
    // The event goes out at once: the crash comes after the send.
    await ensure(false, 'prompts')
    const prompt = data<Prompt>(
      await user('POST', '/api/v1/prompts', { name: 'Crash after send', template: 'Hi {{name}}' }),
      201,
    )
    const version = data<PromptVersion>(await user('POST', `/api/v1/prompts/${prompt._id}/publish`, {}), 201)
    await vi.waitFor(() => expect(withId(version._id)).toHaveLength(1), {
      timeout: SENT_WITHIN_MS,
      interval: 50,
    })
    await stack.processes.prompts?.kill()

    // As if the process had died between publishing to JetStream and marking the row sent.
    const db = new DatabaseSync(join(stack.dataDir, 'prompts.db'))
    try {
      db.prepare('UPDATE outbox SET sent_at = NULL WHERE msg_id = ?').run(version._id)
    } finally {
      db.close()
    }

    await restart('prompts', false)
    // The relay sends it again (same message id) and marks it; JetStream drops the duplicate.
    await vi.waitFor(() => expect(outboxRow(version._id)?.sent_at).not.toBeNull(), {
      timeout: 20_000,
      interval: 50,
    })
    await drainTap()
    expect(withId(version._id)).toHaveLength(1)
  }, 90_000)
})
