// biome-ignore-all lint/suspicious/noTemplateCurlyInString: compose and Dockerfile syntax, not templates
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { checkCompose, type ComposeProject, interpolate, loadCompose, serviceEnv } from '../src/compose.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const FILE = `${ROOT}docker-compose.yml`
/** The variables a user must choose: the shared internal secret and the secrets key have no default. */
const MUST_CHOOSE = ['INTERNAL_AUTH_SECRET', 'SECRETS_KEY']
const ENV = {
  INTERNAL_AUTH_SECRET: 'a-sample-secret-of-at-least-thirty-two-characters',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
}

describe('docker-compose.yml', () => {
  const project = loadCompose(FILE, ENV)

  it('runs the seven apps and the three servers', () => {
    expect(Object.keys(project.services).sort()).toEqual(
      [
        'experiments',
        'gateway',
        'identity',
        'mongo',
        'nats',
        'prompts',
        'redis',
        'render',
        'runs',
        'webhooks',
      ].sort(),
    )
  })

  it('gives the gateway the runs and experiments services (optional in its schema, needed here)', () => {
    expect(serviceEnv(project.services.gateway ?? {})).toMatchObject({
      RUNS_URL: 'http://runs:4005',
      EXPERIMENTS_URL: 'http://experiments:4006',
    })
  })

  it('passes every check: settings, health checks, start order, URLs, ports, variables', () => {
    expect(checkCompose(project, ROOT, MUST_CHOOSE)).toEqual([])
  })

  it('refuses to start without INTERNAL_AUTH_SECRET or SECRETS_KEY, naming it', () => {
    expect(() => loadCompose(FILE, {})).toThrow(/required variable INTERNAL_AUTH_SECRET is missing a value/)
    expect(() => loadCompose(FILE, { INTERNAL_AUTH_SECRET: ENV.INTERNAL_AUTH_SECRET })).toThrow(
      /required variable SECRETS_KEY is missing a value/,
    )
  })

  it('takes settings from the environment, with defaults', () => {
    const custom = loadCompose(FILE, { ...ENV, LOG_LEVEL: 'debug', AUTH_ALLOW_SIGNUP: 'true' })
    expect(serviceEnv(custom.services.identity ?? {})).toMatchObject({
      LOG_LEVEL: 'debug',
      AUTH_ALLOW_SIGNUP: 'true',
    })
    expect(serviceEnv(project.services.identity ?? {})).toMatchObject({
      LOG_LEVEL: 'info',
      AUTH_ALLOW_SIGNUP: 'false',
    })
  })
})

describe('compose interpolation', () => {
  it('follows the compose rules', () => {
    const env = { SET: 'x', EMPTY: '' }
    expect(interpolate('${SET:-d} ${EMPTY:-d} ${EMPTY-d} ${UNSET-d} $SET $$SET', env)).toBe('x d  d x $SET')
    expect(interpolate('${UNSET:-${SET}}', env)).toBe('x')
    expect(interpolate('${SET:+alt}${EMPTY:+alt}', env)).toBe('alt')
    expect(() => interpolate('${EMPTY:?needed}', env)).toThrow(/EMPTY/)
    expect(interpolate('${EMPTY?needed}', env)).toBe('')
  })
})

/** The project with one change, to show each check catches what it is for. */
function broken(change: (p: ComposeProject) => void): string[] {
  const p = structuredClone(loadCompose(FILE, ENV))
  change(p)
  return checkCompose(p, ROOT, MUST_CHOOSE)
}

function env(p: ComposeProject, service: string): Record<string, unknown> {
  const e = p.services[service]?.environment
  if (!e || Array.isArray(e)) throw new Error(`${service} has no environment map`)
  return e
}

describe('the compose checks catch', () => {
  it('a missing server and a missing health check', () => {
    const problems = broken((p) => {
      delete p.services.redis
      delete p.services.render?.healthcheck
    }).join('\n')
    expect(problems).toMatch(/no redis service/)
    expect(problems).toMatch(/render has no health check/)
  })

  it('a setting missing, misspelt or refused by the app', () => {
    const problems = broken((p) => {
      delete env(p, 'webhooks').MONGO_URL
      delete env(p, 'webhooks').SECRETS_KEY
      env(p, 'render').PROMPT_URL = 'http://prompts:4002'
      env(p, 'identity').AUTH_ALLOW_SIGNUP = 'maybe'
    }).join('\n')
    expect(problems).toMatch(/webhooks needs MONGO_URL, not provided/)
    expect(problems).toMatch(/webhooks needs SECRETS_KEY, not provided/)
    expect(problems).toMatch(/PROMPT_URL is not a setting of render/)
    expect(problems).toMatch(/identity would not start: .*AUTH_ALLOW_SIGNUP/)
  })

  it('an app not built from the one Dockerfile with its APP, or an image named after another', () => {
    const problems = broken((p) => {
      const runs = p.services.runs
      if (runs) runs.build = { context: '.', args: { APP: 'render' } }
      const experiments = p.services.experiments
      if (experiments) {
        experiments.build = { context: '.', dockerfile: 'apps/experiments/Dockerfile' }
        experiments.image = 'prompt-service/runs:local'
      }
    }).join('\n')
    expect(problems).toMatch(/runs: not built from Dockerfile with APP=runs/)
    expect(problems).toMatch(/experiments: not built from Dockerfile with APP=experiments/)
    expect(problems).toMatch(/experiments: image prompt-service\/runs:local is not named after the app/)
  })

  it('runs without its secrets key, or given a setting it does not read (Redis)', () => {
    const problems = broken((p) => {
      delete env(p, 'runs').SECRETS_KEY
      env(p, 'runs').REDIS_URL = 'redis://redis:6379'
    }).join('\n')
    expect(problems).toMatch(/runs needs SECRETS_KEY, not provided/)
    expect(problems).toMatch(/REDIS_URL is not a setting of runs/)
  })

  it('the gateway without RUNS_URL, and experiments starting before runs is healthy', () => {
    const problems = broken((p) => {
      delete env(p, 'gateway').RUNS_URL
      const experiments = p.services.experiments
      if (experiments) experiments.depends_on = { prompts: { condition: 'service_healthy' } }
    }).join('\n')
    expect(problems).toMatch(/gateway needs RUNS_URL, not provided/)
    expect(problems).toMatch(/experiments: does not wait for runs to be healthy/)
  })

  it('a URL to the wrong service or port', () => {
    const problems = broken((p) => {
      env(p, 'gateway').RENDER_URLS = 'http://render:4004'
      env(p, 'gateway').REDIS_URL = 'redis://cache:6379'
    }).join('\n')
    expect(problems).toMatch(/RENDER_URLS=http:\/\/render:4004 does not reach render on port 4003/)
    expect(problems).toMatch(/REDIS_URL=redis:\/\/cache:6379 does not reach the redis service/)
  })

  it('an app that starts before what it calls is healthy', () => {
    const problems = broken((p) => {
      const render = p.services.render
      if (render) render.depends_on = { prompts: { condition: 'service_started' } }
    }).join('\n')
    expect(problems).toMatch(/render: does not wait for prompts to be healthy/)
    expect(problems).toMatch(/render: does not wait for nats to be healthy/)
  })

  it('MongoDB without a replica set and NATS without JetStream', () => {
    const problems = broken((p) => {
      if (p.services.mongo) p.services.mongo.command = ['--bind_ip_all']
      if (p.services.nats) p.services.nats.command = ['-m', '8222']
    }).join('\n')
    expect(problems).toMatch(/MongoDB does not run as a replica set/)
    expect(problems).toMatch(/NATS runs without JetStream/)
  })

  it('a published port other than the gateway', () => {
    const problems = broken((p) => {
      if (p.services.identity) p.services.identity.ports = ['4001:4001']
    })
    expect(problems).toEqual([expect.stringMatching(/identity: publishes ports/)])
  })

  it('a variable without a default', () => {
    const problems = broken((p) => {
      p.uses.push({ name: 'LOG_FORMAT', fallback: 'none' })
    })
    expect(problems).toEqual(['compose: ${LOG_FORMAT} has no default'])
  })
})
