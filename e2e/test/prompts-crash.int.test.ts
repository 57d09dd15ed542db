import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import type { NatsBus } from '@pm/bus'
import type { Prompt, PromptVersion, VersionPublishedEvent } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Caller, caller, data, login, type Session, type Tapped, tapEvents } from '../src/prompts.ts'
import { type Stack, startStack } from '../src/stack.ts'

/** How long the relay holds an event back: the window in which the test kills the process. */
const RELAY_DELAY_MS = 5_000

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
    stack = await startStack({ OUTBOX_RELAY_DELAY_MS: String(RELAY_DELAY_MS) })
    admin = await login(stack.gateway)
    user = caller(stack.gateway, admin.token)
    tap = await tapEvents()
  }, 120_000)

  afterAll(async () => {
    await tap?.bus.close()
    await stack?.stop()
  })

  it('sends the event exactly once after SIGKILL between the store write and the send', async () => {
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

    await stack.restart('prompts')
    await vi.waitFor(() => expect(withId(version._id)).toHaveLength(1), {
      timeout: RELAY_DELAY_MS + 20_000,
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
  })

  it('does not deliver twice when the crash comes after the send but before it is marked sent', async () => {
    const prompt = data<Prompt>(
      await user('POST', '/api/v1/prompts', { name: 'Crash after send', template: 'Hi {{name}}' }),
      201,
    )
    const version = data<PromptVersion>(await user('POST', `/api/v1/prompts/${prompt._id}/publish`, {}), 201)
    await vi.waitFor(() => expect(withId(version._id)).toHaveLength(1), {
      timeout: RELAY_DELAY_MS + 20_000,
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

    await stack.restart('prompts')
    // The relay sends it again (same message id) and marks it; JetStream drops the duplicate.
    await vi.waitFor(() => expect(outboxRow(version._id)?.sent_at).not.toBeNull(), {
      timeout: 20_000,
      interval: 50,
    })
    await drainTap()
    expect(withId(version._id)).toHaveLength(1)
  })
})
