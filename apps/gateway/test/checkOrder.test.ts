import { MemoryBus } from '@pm/bus'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.ts'
import { offlineConfig } from './offline.ts'

/**
 * The order of the gateway's answers when several apply: a missing credential (401) before a
 * malformed path (400); the path's ids are still checked before any internal call is made with
 * them (the key guard and the routes' own checks are tested elsewhere).
 */
describe('which refusal comes first', () => {
  let app: Awaited<ReturnType<typeof buildApp>>
  const bus = new MemoryBus()

  beforeAll(async () => {
    // Nobody listens: nothing here may reach an upstream.
    app = await buildApp({ config: offlineConfig(), bus })
  })
  afterAll(async () => {
    await app?.close()
    await bus.close()
  })

  it('no credential and a malformed id: 401 AUTH_REQUIRED, as with a good id', async () => {
    for (const url of [
      '/api/v1/prompts/nothex',
      '/api/v1/organizations/zz',
      '/api/v1/prompts/0123456789abcdef01234567',
    ]) {
      const res = await app.inject({ method: 'GET', url })
      expect([url, res.statusCode, res.json().error.code]).toEqual([url, 401, 'AUTH_REQUIRED'])
    }
  })

  it('a public route still checks its path: a malformed id is 400', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/public/prompts/nothex' })
    expect(res.statusCode).toBe(400)
    expect(res.json().error.code).toBe('VALIDATION_ERROR')
  })
})
