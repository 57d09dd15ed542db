import { randomBytes } from 'node:crypto'
import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { loadGatewayConfig } from '../src/app.ts'
import { Upstreams } from '../src/proxy.ts'

const base = { NODE_ENV: 'test', INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex') }

describe('optional upstreams (runs, experiments)', () => {
  it('unset: their routes answer 503 SERVICE_UNAVAILABLE naming the setting, and readiness skips them', () => {
    const upstreams = new Upstreams(loadGatewayConfig(base))
    expect(upstreams.named().map(([name]) => name)).toEqual(['identity', 'prompts', 'webhooks', 'render0'])
    for (const [name, setting] of [
      ['runs', 'RUNS_URL'],
      ['experiments', 'EXPERIMENTS_URL'],
    ] as const) {
      let thrown: unknown
      try {
        upstreams.urlFor(name)
      } catch (err) {
        thrown = err
      }
      expect(thrown).toBeInstanceOf(AppError)
      expect((thrown as AppError).code).toBe('SERVICE_UNAVAILABLE')
      expect((thrown as AppError).message).toContain(setting)
    }
  })

  it('set: proxied and checked for readiness like the others', () => {
    const upstreams = new Upstreams(
      loadGatewayConfig({
        ...base,
        RUNS_URL: 'http://runs:4005',
        EXPERIMENTS_URL: 'http://experiments:4006',
      }),
    )
    expect(upstreams.urlFor('runs')).toBe('http://runs:4005')
    expect(upstreams.urlFor('experiments')).toBe('http://experiments:4006')
    expect(upstreams.named().map(([name]) => name)).toContain('runs')
  })
})
