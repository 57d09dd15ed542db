import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import {
  freePort,
  natsUrl,
  REPO_ROOT,
  redisUrl,
  type RunningProcess,
  startProcess,
  waitForHttp,
} from '@pm/testkit'
import { ADMIN } from './slice.ts'

export interface Stack {
  gateway: string
  ports: Record<string, number>
  /** Each process's METRICS_PORT, when started with `metrics`. */
  metricsPorts: Record<string, number>
  processes: Record<string, RunningProcess>
  dataDir: string
  env: Record<string, string>
  /** Restarts one service with the same settings, `env` overriding some of them for this start only. */
  restart(name: string, env?: Record<string, string>): Promise<void>
  /** Restarts every process: the services side by side, then the gateway. */
  restartAll(): Promise<void>
  stop(): Promise<void>
}

/** The services every stack starts; the gateway needs no others (EXPERIMENTS_URL and RUNS_URL are optional). */
const CORE = ['identity', 'prompts', 'render', 'webhooks'] as const

/** The services a stack starts only when asked: experiments calls runs, nothing else calls either. */
export type OptionalService = 'experiments' | 'runs'

export interface StackOptions {
  /**
   * The optional services to start too, each behind the gateway (EXPERIMENTS_URL, RUNS_URL).
   * None by default: a file that never calls them would pay two starts for nothing (about 1.3 s
   * of CPU a stack on the 2-core VMs; 16 of the 19 files that start stacks need neither).
   * Without `runs`, experiments calls the RUNS_URL the file's env gives (a fake of its own).
   */
  with?: readonly OptionalService[]
  /** Render replicas behind the gateway (RENDER_URLS); the extra ones are named render2, render3, ... */
  renderReplicas?: number
  /** Give every process a METRICS_PORT of its own. */
  metrics?: boolean
}

/**
 * The distributed mode: one process per service and the gateway (stores on SQLite), events over the real NATS,
 * limits in the real Redis. Experiments and runs only when `options.with` names them.
 */
export async function startStack(
  extraEnv: Record<string, string> = {},
  options: StackOptions = {},
): Promise<Stack> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pm-stack-'))
  const extraRenders = Array.from(
    { length: Math.max(0, (options.renderReplicas ?? 1) - 1) },
    (_, i) => `render${i + 2}`,
  )
  const ports: Record<string, number> = {}
  const metricsPorts: Record<string, number> = {}
  const services: string[] = [...CORE, ...(options.with ?? [])]
  for (const name of [...services, ...extraRenders, 'gateway']) {
    ports[name] = await freePort()
    if (options.metrics) metricsPorts[name] = await freePort()
  }
  const env: Record<string, string> = {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    HOST: '127.0.0.1',
    INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    // As in the real distributed mode (compose, Kubernetes): the key that seals secrets at rest.
    SECRETS_KEY: randomBytes(32).toString('base64'),
    DATA_DIR: dataDir,
    NATS_URL: await natsUrl(),
    REDIS_URL: await redisUrl(),
    IDENTITY_URL: `http://127.0.0.1:${ports.identity}`,
    PROMPTS_URL: `http://127.0.0.1:${ports.prompts}`,
    RENDER_URLS: ['render', ...extraRenders].map((name) => `http://127.0.0.1:${ports[name]}`).join(','),
    WEBHOOKS_URL: `http://127.0.0.1:${ports.webhooks}`,
    // Every upstream the gateway is given runs: it is ready only when all of them answer.
    ...(ports.experiments ? { EXPERIMENTS_URL: `http://127.0.0.1:${ports.experiments}` } : {}),
    ...(ports.runs ? { RUNS_URL: `http://127.0.0.1:${ports.runs}` } : {}),
    RENDER_URL: `http://127.0.0.1:${ports.render}`,
    BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
    BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
    BOOTSTRAP_ORG_NAME: ADMIN.org,
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    ...extraEnv,
  }
  const processes: Record<string, RunningProcess> = {}
  const launch = async (name: string, override: Record<string, string> = {}) => {
    const app = name.startsWith('render') ? 'render' : name
    const proc = startProcess(name, join(REPO_ROOT, `apps/${app}/src/server.ts`), {
      ...env,
      ...override,
      PORT: String(ports[name]),
      ...(metricsPorts[name] ? { METRICS_PORT: String(metricsPorts[name]) } : {}),
    })
    processes[name] = proc
    await waitForHttp(`http://127.0.0.1:${ports[name]}/health/ready`, 90_000, proc)
  }
  const stop = async () => {
    await Promise.all(Object.values(processes).map((p) => p.stop()))
    rmSync(dataDir, { recursive: true, force: true })
  }
  // The services side by side (none needs another to start), then the gateway, whose
  // readiness asks every upstream.
  const launchAll = async () => {
    await Promise.all([...services, ...extraRenders].map((name) => launch(name)))
    await launch('gateway')
  }
  try {
    await launchAll()
  } catch (err) {
    await stop()
    throw err
  }
  return {
    gateway: `http://127.0.0.1:${ports.gateway}`,
    ports,
    metricsPorts,
    processes,
    dataDir,
    env,
    restart: async (name: string, override?: Record<string, string>) => {
      await processes[name]?.stop()
      await launch(name, override)
    },
    restartAll: async () => {
      await Promise.all(Object.values(processes).map((p) => p.stop()))
      await launchAll()
    },
    stop,
  }
}
