import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { CONTEXT_HEADER, type Dataset } from '@pm/contracts'
import { newId, type Service, signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadExperimentsConfig } from '../src/app.ts'
import { SqliteExperimentStore } from '../src/store/sqlite.ts'

/** The experiments service on a fresh SQLite file and an in-process bus, through app.inject. */
describe('experiments routes: bad input is a 400', () => {
  const dir = mkdtempSync(join(tmpdir(), 'pm-experiments-'))
  const secret = randomBytes(32).toString('hex')
  const org = newId()
  const bus = new MemoryBus(10)
  const store = new SqliteExperimentStore(join(dir, 'experiments.db'))
  let app: Service
  const headers = () => ({
    [CONTEXT_HEADER]: signContext(
      {
        kind: 'user',
        userId: newId(),
        organizationId: org,
        role: 'OWNER',
        scopes: ['prompts:read', 'prompts:write', 'runs:write'],
        requestId: newId(),
      },
      secret,
    ),
  })

  beforeAll(async () => {
    const config = loadExperimentsConfig({ INTERNAL_AUTH_SECRET: secret, DATA_DIR: dir, LOG_LEVEL: 'silent' })
    app = await buildApp({
      config,
      bus,
      store,
      executor: {
        run: async () => {
          throw new Error('no model in these tests')
        },
        close: async () => {},
      },
    })
    await app.ready()
  })
  afterAll(async () => {
    await app.close()
    await bus.close()
    await store.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('an empty variable name is refused by the JSON routes, as by the uploads', async () => {
    const empty = await app.inject({
      method: 'POST',
      url: '/api/v1/datasets',
      headers: headers(),
      payload: { name: 'd', items: [{ variables: { '': 1 } }] },
    })
    expect(empty.statusCode).toBe(400)
    expect(empty.json()).toMatchObject({ error: { code: 'VALIDATION_ERROR' } })
    const created = await app.inject({
      method: 'POST',
      url: '/api/v1/datasets',
      headers: headers(),
      payload: { name: 'd' },
    })
    expect(created.statusCode).toBe(201)
    const dataset = created.json<Dataset>()
    const added = await app.inject({
      method: 'POST',
      url: `/api/v1/datasets/${dataset._id}/items`,
      headers: headers(),
      payload: { items: [{ variables: { q: 1 } }, { variables: { '': 1 } }] },
    })
    expect(added.statusCode).toBe(400)
    expect(added.json()).toMatchObject({
      error: { code: 'VALIDATION_ERROR', details: { errors: [{ path: '/body/items/1/variables' }] } },
    })
    expect((await store.getDataset(org, dataset._id))?.itemCount).toBe(0)
  })

  it.each([
    ['an $async schema', { $async: true, type: 'object' }],
    ['a pattern RE2 cannot run', { type: 'string', pattern: '(a)\\1' }],
  ])('json-schema with %s is refused when the experiment is created', async (_what, schema) => {
    const res = await app.inject({
      method: 'POST',
      url: '/api/v1/experiments',
      headers: headers(),
      payload: {
        name: 'e',
        datasetId: newId(),
        variants: [{ promptId: newId() }],
        connectionId: newId(),
        evaluators: [{ type: 'exact' }, { type: 'json-schema', schema }],
      },
    })
    expect(res.statusCode).toBe(400)
    expect(res.json()).toMatchObject({
      error: { code: 'VALIDATION_ERROR', details: { errors: [{ path: '/body/evaluators/1' }] } },
    })
  })
})
