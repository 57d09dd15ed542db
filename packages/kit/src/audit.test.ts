import type { AuditEntry } from '@pm/contracts'
import { describe, expect, it, vi } from 'vitest'
import { type AuditOutbox, AuditRelay, auditEntry, isAuditEntry } from './audit.ts'

const ctx = {
  actor: { type: 'user' as const, id: 'a'.repeat(24), name: 'Ada' },
  requestId: 'r',
  ip: '127.0.0.1',
}

/** An outbox in memory: what the relay sees of a store. */
function memoryOutbox(entries: AuditEntry[]): AuditOutbox & { sent: Map<string, string> } {
  const sent = new Map<string, string>()
  return {
    sent,
    async pendingAudit(limit) {
      return entries.filter((e) => !sent.has(e.id)).slice(0, limit)
    },
    async markAuditSent(ids, at) {
      for (const id of ids) sent.set(id, at)
    },
    async pruneAuditOutbox() {
      return 0
    },
  }
}

describe('audit entries and their relay', () => {
  it('builds entries the ingesting side accepts, and refuses anything else', () => {
    const e = auditEntry(
      ctx,
      'b'.repeat(24),
      'webhook.created',
      { type: 'webhook', id: 'c'.repeat(24) },
      'x'.repeat(600),
    )
    expect(e.summary).toHaveLength(500)
    expect(isAuditEntry(e)).toBe(true)
    expect(isAuditEntry({ ...e, action: 'prompt.exploded' })).toBe(false)
    expect(isAuditEntry({ ...e, organizationId: 'nope' })).toBe(false)
    expect(isAuditEntry({ ...e, actor: { ...e.actor, type: 'service' } })).toBe(false)
    expect(isAuditEntry(null)).toBe(false)
  })

  it('marks an entry sent only once the bus took it; a failed publish is tried again', async () => {
    const entries = [1, 2, 3].map((n) =>
      auditEntry(ctx, 'b'.repeat(24), 'member.added', { type: 'member', id: String(n) }, `n${n}`),
    )
    const outbox = memoryOutbox(entries)
    const published: string[] = []
    let failOnce = true
    const relay = new AuditRelay(outbox, {
      subject: 'pm.events.audit.entry',
      pollMs: 20,
      log: { warn: () => {} },
      publish: async (subject, entry, msgId) => {
        expect(subject).toBe('pm.events.audit.entry')
        expect(msgId).toBe(entry.id)
        if (entry.summary === 'n2' && failOnce) {
          failOnce = false
          throw new Error('bus down')
        }
        published.push(entry.summary)
      },
    })
    relay.start()
    await vi.waitFor(() => expect(outbox.sent.size).toBe(3), { timeout: 2_000, interval: 10 })
    await relay.stop()
    // n1 went out before the failure and was marked sent then; n2 and n3 on the next pass.
    expect(published).toEqual(['n1', 'n2', 'n3'])
  })

  it('holds entries back for delayMs, then publishes each once, in order', async () => {
    const now = Date.now()
    const at = (ago: number) => new Date(now - ago).toISOString()
    const entries = [
      auditEntry(ctx, 'b'.repeat(24), 'member.added', { type: 'member', id: '1' }, 'old', at(5_000)),
      auditEntry(ctx, 'b'.repeat(24), 'member.added', { type: 'member', id: '2' }, 'new', at(0)),
    ]
    const outbox = memoryOutbox(entries)
    const published: { summary: string; after: number }[] = []
    const relay = new AuditRelay(outbox, {
      subject: 'pm.events.audit.entry',
      pollMs: 60_000,
      delayMs: 300,
      log: { warn: () => {} },
      publish: async (_subject, entry) => {
        published.push({ summary: entry.summary, after: Date.now() - now })
      },
    })
    relay.start()
    // The old entry at once; the new one when it falls due, not at the next (one-minute) poll.
    await vi.waitFor(() => expect(published.map((p) => p.summary)).toEqual(['old', 'new']), {
      timeout: 2_000,
      interval: 10,
    })
    await relay.stop()
    expect(published[1]?.after).toBeGreaterThanOrEqual(300)
    expect(outbox.sent.size).toBe(2)
  })
})
