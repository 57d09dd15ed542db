import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import {
  type AuditEntry,
  type CallerContext,
  CONTEXT_HEADER,
  type CreateExperimentRequest,
  type Dataset,
  DATASET_ITEMS_MAX,
  SUBJECTS,
} from '@pm/contracts'
import { type AuditContext, newId, type Service, signContext } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { buildApp, loadExperimentsConfig } from '../src/app.ts'
import type { PromptsClient } from '../src/services/clients.ts'
import { ExperimentsService } from '../src/services/experiments.ts'
import type { Runner } from '../src/services/runner.ts'
import { SqliteExperimentStore } from '../src/store/sqlite.ts'

/**
 * The audit entries of dataset and experiment changes (DESIGN section 15): the service with its
 * SQLite store, prompts and the runner stood in for.
 */

const dir = mkdtempSync(join(tmpdir(), 'pm-experiments-audit-'))
const store = new SqliteExperimentStore(join(dir, 'experiments.db'))
const bus = new MemoryBus(10)
const onAudit = vi.fn()
const service = new ExperimentsService({
  store,
  bus,
  prompts: { checkVariant: async () => {} } as unknown as PromptsClient,
  runner: { drive: () => {}, stop: () => {}, isDriving: () => false } as unknown as Runner,
  log: { warn: () => {}, info: () => {}, error: () => {} } as unknown as FastifyBaseLogger,
  defaultConcurrency: 2,
  onAudit,
})
afterAll(async () => {
  await bus.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

const ada: AuditContext = {
  actor: { type: 'user', id: newId(), name: 'Ada' },
  requestId: 'req-audit-1',
  ip: '203.0.113.7',
}
const ciKey: AuditContext = {
  actor: { type: 'apiKey', id: newId(), name: 'ci key' },
  requestId: 'req-audit-2',
  ip: '198.51.100.9',
}

async function entriesOf(org: string): Promise<AuditEntry[]> {
  return (await store.pendingAudit(1_000)).filter((e) => e.organizationId === org)
}

const callerOf = (org: string): CallerContext => ({
  kind: 'user',
  userId: ada.actor.id,
  organizationId: org,
  role: 'OWNER',
  scopes: ['prompts:read', 'runs:write'],
  requestId: 'req-audit-3',
})

const experimentBody = (datasetId: string): CreateExperimentRequest => ({
  name: 'tone check',
  datasetId,
  variants: [{ promptId: newId() }, { promptId: newId(), draft: true }],
  connectionId: newId(),
  evaluators: [],
})

describe('dataset and experiment changes in the audit log', () => {
  it('writes one entry per change, with the actor, resource, request and address', async () => {
    const org = newId()
    onAudit.mockClear()
    const d = await service.createDataset(org, { name: 'faq', items: [{ variables: { q: 'a' } }] }, ada)
    await service.updateDataset(org, d._id, { name: 'faq v2', description: 'more' }, ciKey)
    await service.addItems(
      org,
      d._id,
      [{ variables: { q: 'b' } }, { variables: { q: 'c' } }],
      ciKey,
      'the file "faq.csv"',
    )
    const items = await service.listItems(org, d._id, { page: 1, limit: 10 })
    const first = items.items[0]
    if (!first) throw new Error('no item')
    await service.deleteItem(org, d._id, first._id, ada)
    const { experimentId } = await service.createExperiment(callerOf(org), org, experimentBody(d._id), ada)
    await service.cancel(org, experimentId, ciKey)
    await service.deleteDataset(org, d._id, ada)

    const entries = await entriesOf(org)
    const dataset = { type: 'dataset', id: d._id }
    const experiment = { type: 'experiment', id: experimentId }
    expect(entries.map((e) => [e.action, e.actor, e.resource, e.requestId, e.ip])).toEqual([
      ['dataset.created', ada.actor, dataset, ada.requestId, ada.ip],
      ['dataset.items_added', ada.actor, dataset, ada.requestId, ada.ip],
      ['dataset.updated', ciKey.actor, dataset, ciKey.requestId, ciKey.ip],
      ['dataset.items_added', ciKey.actor, dataset, ciKey.requestId, ciKey.ip],
      ['dataset.item_deleted', ada.actor, dataset, ada.requestId, ada.ip],
      ['experiment.created', ada.actor, experiment, ada.requestId, ada.ip],
      ['experiment.cancelled', ciKey.actor, experiment, ciKey.requestId, ciKey.ip],
      ['dataset.deleted', ada.actor, dataset, ada.requestId, ada.ip],
    ])
    expect(entries.map((e) => e.summary)).toEqual([
      'created the dataset "faq"',
      'added 1 item to the dataset "faq"',
      'updated the dataset "faq v2": renamed from "faq"; description changed',
      'added 2 items to the dataset "faq v2" from the file "faq.csv"',
      `deleted item 1 (${first._id}) of the dataset "faq v2"`,
      'started the experiment "tone check" on the dataset "faq v2": 2 variants × 2 items',
      'cancelled the experiment "tone check" (it was queued)',
      'deleted the dataset "faq v2" with its 2 items',
    ])
    expect(onAudit).toHaveBeenCalledTimes(8)
  })

  it('writes none for a refused change, nor without an actor', async () => {
    const org = newId()
    const d = await service.createDataset(org, { name: 'quiet' })
    // Validation: metadata past its bound, an empty dataset for an experiment.
    const metadata = { blob: 'x'.repeat(17 * 1024) }
    await expect(
      service.addItems(org, d._id, [{ variables: { q: 1 }, metadata }], ada),
    ).rejects.toMatchObject({ code: 'VALIDATION_ERROR' })
    await expect(
      service.createExperiment(callerOf(org), org, experimentBody(d._id), ada),
    ).rejects.toMatchObject({ code: 'VALIDATION_ERROR' })
    // Not found: a dataset, an item, an experiment, another organization's dataset.
    const missing = newId()
    await expect(service.updateDataset(org, missing, { name: 'x' }, ada)).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
    await expect(service.deleteDataset(org, missing, ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    await expect(service.addItems(org, missing, [{ variables: { q: 1 } }], ada)).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
    await expect(service.deleteItem(org, d._id, newId(), ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    await expect(service.cancel(org, newId(), ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    await expect(service.deleteDataset(newId(), d._id, ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    // Past the bound: nothing added, nothing recorded.
    const many = Array.from({ length: DATASET_ITEMS_MAX + 1 }, () => ({ variables: { q: 1 } }))
    await expect(service.addItems(org, d._id, many, ada)).rejects.toMatchObject({ code: 'CONFLICT' })
    // Without an actor: the change is made, and not recorded.
    await service.addItems(org, d._id, [{ variables: { q: 1 } }])
    const { experimentId } = await service.createExperiment(callerOf(org), org, experimentBody(d._id))
    // A cancel of an experiment that has ended already changes nothing.
    await service.cancel(org, experimentId)
    await expect(service.cancel(org, experimentId, ada)).rejects.toMatchObject({ code: 'CONFLICT' })
    // A dataset with an experiment running is not deleted.
    const busy = await service.createExperiment(callerOf(org), org, experimentBody(d._id))
    await expect(service.deleteDataset(org, d._id, ada)).rejects.toMatchObject({ code: 'CONFLICT' })
    await service.cancel(org, busy.experimentId)
    expect(await entriesOf(org)).toEqual([])
  })
})

describe('the experiments service relays its entries', () => {
  it('publishes them on the audit subject, with the caller named by the gateway and its address', async () => {
    const appDir = mkdtempSync(join(tmpdir(), 'pm-experiments-audit-app-'))
    const secret = randomBytes(32).toString('hex')
    const appBus = new MemoryBus(10)
    const published: AuditEntry[] = []
    await appBus.consume(SUBJECTS.auditEntry, 'test-audit', async (data) => {
      published.push(data as AuditEntry)
    })
    let app: Service | undefined
    try {
      app = await buildApp({
        config: loadExperimentsConfig({
          INTERNAL_AUTH_SECRET: secret,
          DATA_DIR: appDir,
          LOG_LEVEL: 'silent',
          AUDIT_RELAY_POLL_MS: '50',
        }),
        bus: appBus,
        executor: {
          run: async () => {
            throw new Error('no model in these tests')
          },
          close: async () => {},
        },
      })
      await app.ready()
      const org = newId()
      const apiKeyId = newId()
      const res = await app.inject({
        method: 'POST',
        url: '/api/v1/datasets',
        headers: {
          [CONTEXT_HEADER]: signContext(
            {
              kind: 'apiKey',
              apiKeyId,
              organizationId: org,
              scopes: ['prompts:read', 'prompts:write'],
              requestId: 'req-app-1',
              actorName: 'ci key',
            },
            secret,
          ),
          'x-pm-client-ip': '203.0.113.7',
        },
        payload: { name: 'uploaded' },
      })
      expect(res.statusCode).toBe(201)
      const id = res.json<Dataset>()._id
      await vi.waitFor(() => expect(published).toHaveLength(1), { timeout: 5_000, interval: 20 })
      expect(published[0]).toMatchObject({
        organizationId: org,
        action: 'dataset.created',
        actor: { type: 'apiKey', id: apiKeyId, name: 'ci key' },
        resource: { type: 'dataset', id },
        ip: '203.0.113.7',
        summary: 'created the dataset "uploaded"',
      })
    } finally {
      await app?.close()
      await appBus.close()
      rmSync(appDir, { recursive: true, force: true })
    }
  })
})
