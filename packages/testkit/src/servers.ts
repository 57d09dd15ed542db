import { GenericContainer, type StartedTestContainer } from 'testcontainers'
import { startPrivateServer, stopPrivateServers } from './privateServers.ts'

/**
 * Real servers for tests. A URL from the environment wins (CI sets NATS_URL and REDIS_URL
 * to the machine's servers); otherwise testcontainers starts one; with neither, the test
 * fails with a message saying what to set. Never a silent skip.
 */
const started: StartedTestContainer[] = []

async function containerRuntimeAvailable(): Promise<boolean> {
  try {
    const { getContainerRuntimeClient } = await import('testcontainers')
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 5_000)),
    ])
    return true
  } catch {
    return false
  }
}

let runtime: Promise<boolean> | undefined
export function hasContainerRuntime(): Promise<boolean> {
  runtime ??= containerRuntimeAvailable()
  return runtime
}

async function fromEnvOrContainer(
  envName: string,
  image: string,
  port: number,
  scheme: string,
  cmd?: string[],
): Promise<string> {
  const fromEnv = process.env[envName]
  if (fromEnv) return fromEnv
  if (!(await hasContainerRuntime())) {
    throw new Error(
      `${envName} is not set and no container runtime was found: set ${envName} (e.g. ${scheme}://127.0.0.1:${port}) or start Docker`,
    )
  }
  let container = new GenericContainer(image).withExposedPorts(port)
  if (cmd) container = container.withCommand(cmd)
  const c = await container.start()
  started.push(c)
  return `${scheme}://${c.getHost()}:${c.getMappedPort(port)}`
}

let nats: Promise<string> | undefined
export function natsUrl(): Promise<string> {
  nats ??= startPrivateServer('nats').then(
    (url) => url ?? fromEnvOrContainer('NATS_URL', 'nats:2.10-alpine', 4222, 'nats', ['-js']),
  )
  return nats
}

let redis: Promise<string> | undefined
export function redisUrl(): Promise<string> {
  redis ??= startPrivateServer('redis').then(
    (url) => url ?? fromEnvOrContainer('REDIS_URL', 'redis:7-alpine', 6379, 'redis'),
  )
  return redis
}

/**
 * For test files that share a worker's modules (vitest's `isolate: false`, vitest.setup.int.ts):
 * the private NATS and Redis of the file before are stopped, and the next call of natsUrl or
 * redisUrl starts new ones, so that no file sees another's streams, consumers or keys.
 */
export function forgetPrivateServers(): void {
  stopPrivateServers()
  nats = undefined
  redis = undefined
}

let mongo: Promise<string | null> | undefined
/**
 * MongoDB for the repository contract suites: MONGO_URL, else a testcontainers replica
 * set, else null (the suites then run against SQLite only and say so).
 */
export function mongoUrl(): Promise<string | null> {
  mongo ??= (async () => {
    if (process.env.MONGO_URL) return process.env.MONGO_URL
    if (!(await hasContainerRuntime())) return null
    const { MongoDBContainer } = await import('@testcontainers/mongodb')
    const c = await new MongoDBContainer('mongo:8').start()
    started.push(c)
    return `${c.getConnectionString()}?directConnection=true`
  })()
  return mongo
}

export async function stopContainers(): Promise<void> {
  await Promise.all(started.splice(0).map((c) => c.stop()))
}
