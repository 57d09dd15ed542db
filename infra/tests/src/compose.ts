import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { APP_NAMES, APPS, type AppName, checkSettings, SERVER_SETTING, type ServerName } from './apps.ts'
import { APP_ARG, DOCKERFILE } from './dockerfile.ts'
import { readYamlDocuments } from './kustomize.ts'

export interface VariableUse {
  name: string
  /** How the file handles an unset variable: a default, an error (`:?`), or nothing. */
  fallback: 'default' | 'error' | 'none'
}

/**
 * Compose's variable interpolation: `$$`, `$VAR`, `${VAR}`, `${VAR:-default}`, `${VAR-default}`,
 * `${VAR:?error}`, `${VAR?error}`, `${VAR:+alt}`, `${VAR+alt}`, with nesting in the default.
 * An unset `${VAR:?error}` throws, like `docker compose config` does.
 */
export function interpolate(
  text: string,
  env: Record<string, string | undefined>,
  uses: VariableUse[] = [],
): string {
  let out = ''
  let i = 0
  while (i < text.length) {
    const ch = text[i]
    if (ch !== '$') {
      out += ch
      i++
      continue
    }
    const next = text[i + 1]
    if (next === '$') {
      out += '$'
      i += 2
      continue
    }
    if (next !== '{') {
      const match = /^[A-Za-z_][A-Za-z0-9_]*/.exec(text.slice(i + 1))
      if (!match) {
        out += '$'
        i++
        continue
      }
      uses.push({ name: match[0], fallback: 'none' })
      out += env[match[0]] ?? ''
      i += 1 + match[0].length
      continue
    }
    // ${...}: find the matching brace, allowing nested ${...} in the default.
    let depth = 0
    let end = i + 1
    for (; end < text.length; end++) {
      if (text[end] === '{') depth++
      else if (text[end] === '}' && --depth === 0) break
    }
    if (end >= text.length) throw new Error(`unclosed \${ in "${text}"`)
    const body = text.slice(i + 2, end)
    const match = /^([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?+])([\s\S]*))?$/.exec(body)
    if (!match) throw new Error(`bad variable expression \${${body}}`)
    const [, name = '', op, arg = ''] = match
    const value = env[name]
    const unset = value === undefined
    const empty = unset || value === ''
    if (op === ':-' || op === '-') {
      uses.push({ name, fallback: 'default' })
      out += (op === ':-' ? empty : unset) ? interpolate(arg, env, uses) : value
    } else if (op === ':?' || op === '?') {
      uses.push({ name, fallback: 'error' })
      if (op === ':?' ? empty : unset) throw new Error(`required variable ${name} is missing a value: ${arg}`)
      out += value
    } else if (op === ':+' || op === '+') {
      uses.push({ name, fallback: 'default' })
      out += (op === ':+' ? !empty : !unset) ? interpolate(arg, env, uses) : ''
    } else {
      uses.push({ name, fallback: 'none' })
      out += value ?? ''
    }
    i = end + 1
  }
  return out
}

function interpolateAll(
  value: unknown,
  env: Record<string, string | undefined>,
  uses: VariableUse[],
): unknown {
  if (typeof value === 'string') return interpolate(value, env, uses)
  if (Array.isArray(value)) return value.map((v) => interpolateAll(v, env, uses))
  if (typeof value === 'object' && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, interpolateAll(v, env, uses)]))
  }
  return value
}

export interface ComposeService {
  image?: string
  build?:
    | string
    | { context?: string; dockerfile?: string; args?: Record<string, string | number | null> | string[] }
  command?: string | string[]
  environment?: Record<string, string | number | boolean | null> | string[]
  depends_on?: string[] | Record<string, { condition?: string }>
  healthcheck?: { test?: string | string[]; disable?: boolean }
  ports?: Array<string | number | { target?: number; published?: string | number }>
  [key: string]: unknown
}

export interface ComposeProject {
  services: Record<string, ComposeService>
  uses: VariableUse[]
}

/** Reads a compose file as `docker compose config` would: YAML merge keys, then interpolation. */
export function loadCompose(file: string, env: Record<string, string | undefined>): ComposeProject {
  const [doc] = readYamlDocuments(readFileSync(file, 'utf8'), file)
  const uses: VariableUse[] = []
  const resolved = interpolateAll(doc, env, uses) as { services?: Record<string, ComposeService> }
  if (!resolved.services) throw new Error(`${file}: no services`)
  return { services: resolved.services, uses }
}

export function serviceEnv(service: ComposeService): Record<string, string> {
  const env: Record<string, string> = {}
  if (Array.isArray(service.environment)) {
    for (const entry of service.environment) {
      const [key = '', ...rest] = entry.split('=')
      env[key] = rest.join('=')
    }
  } else {
    for (const [key, value] of Object.entries(service.environment ?? {}))
      env[key] = value === null ? '' : String(value)
  }
  return env
}

function buildArgs(
  args: Record<string, string | number | null> | string[] | undefined,
): Record<string, string> {
  if (Array.isArray(args))
    return Object.fromEntries(args.map((a) => [a.split('=')[0], a.split('=').slice(1).join('=')]))
  return Object.fromEntries(Object.entries(args ?? {}).map(([k, v]) => [k, v === null ? '' : String(v)]))
}

function dependsOn(service: ComposeService): Record<string, string | undefined> {
  if (Array.isArray(service.depends_on))
    return Object.fromEntries(service.depends_on.map((d) => [d, undefined]))
  return Object.fromEntries(Object.entries(service.depends_on ?? {}).map(([k, v]) => [k, v.condition]))
}

function command(service: ComposeService): string[] {
  return Array.isArray(service.command) ? service.command : (service.command ?? '').split(/\s+/)
}

function healthTest(service: ComposeService): string {
  const test = service.healthcheck?.test
  return Array.isArray(test) ? test.join(' ') : (test ?? '')
}

/** The service running each server, found by its image. */
export function serverServices(project: ComposeProject): Partial<Record<ServerName, string>> {
  const out: Partial<Record<ServerName, string>> = {}
  for (const [name, service] of Object.entries(project.services)) {
    for (const server of ['mongo', 'nats', 'redis'] as const) {
      if (service.image?.split(':')[0]?.split('/').pop() === server) out[server] = name
    }
  }
  return out
}

/**
 * The compose file runs the distributed mode completely: the seven apps built from the one
 * Dockerfile (each with its APP build argument) with complete settings the apps accept, the three servers (MongoDB as a
 * replica set, NATS with JetStream), health checks everywhere, every app starting after
 * what it calls is healthy, URLs that reach the right service and port, only the gateway
 * published, and no variable left without a default but the secret that must be chosen.
 */
export function checkCompose(project: ComposeProject, repoRoot: string, mustChoose: string[]): string[] {
  const problems: string[] = []
  const servers = serverServices(project)
  for (const server of ['mongo', 'nats', 'redis'] as const) {
    if (!servers[server]) problems.push(`compose: no ${server} service`)
  }
  for (const [name, service] of Object.entries(project.services)) {
    if (!healthTest(service) || service.healthcheck?.disable)
      problems.push(`compose: ${name} has no health check`)
  }
  const mongo = servers.mongo ? project.services[servers.mongo] : undefined
  const mongoArgs = mongo ? command(mongo) : []
  const replSet = mongoArgs.includes('--replSet') ? mongoArgs[mongoArgs.indexOf('--replSet') + 1] : undefined
  if (mongo && !replSet) problems.push('compose: MongoDB does not run as a replica set (--replSet)')
  if (mongo && !healthTest(mongo).includes('rs.initiate'))
    problems.push('compose: nothing initiates the replica set')
  const nats = servers.nats ? project.services[servers.nats] : undefined
  if (nats && !command(nats).some((a) => a === '--jetstream' || a === '-js')) {
    problems.push('compose: NATS runs without JetStream')
  }

  const ports: Partial<Record<AppName, number>> = {}
  for (const app of APP_NAMES) {
    const service = project.services[app]
    if (!service) continue
    const check = checkSettings(APPS[app], serviceEnv(service), 'compose')
    problems.push(...check.problems)
    if (check.port !== undefined) ports[app] = check.port
  }

  for (const app of APP_NAMES) {
    const service = project.services[app]
    if (!service) {
      problems.push(`compose: no ${app} service`)
      continue
    }
    const where = `compose: ${app}`
    const build = typeof service.build === 'object' ? service.build : { context: service.build }
    const dockerfile = build.dockerfile ?? 'Dockerfile'
    if (
      (build.context ?? '.') !== '.' ||
      dockerfile !== DOCKERFILE ||
      !existsSync(join(repoRoot, dockerfile)) ||
      buildArgs(build.args)[APP_ARG] !== app
    ) {
      problems.push(`${where}: not built from ${DOCKERFILE} with ${APP_ARG}=${app}`)
    }
    if (!service.image?.split(':')[0]?.endsWith(`/${app}`))
      problems.push(`${where}: image ${service.image} is not named after the app`)
    const test = healthTest(service)
    if (!test.includes('/health/ready')) problems.push(`${where}: health check does not ask /health/ready`)
    if (!test.includes('process.env.PORT') && !test.includes(`:${ports[app]}/`)) {
      problems.push(`${where}: health check does not use the app's port`)
    }
    const env = serviceEnv(service)
    const deps = dependsOn(service)
    const needs = [
      ...Object.values(APPS[app].calls),
      ...APPS[app].servers.map((s) => servers[s]).filter((s) => s !== undefined),
    ]
    for (const dep of new Set(needs)) {
      if (dep && deps[dep] !== 'service_healthy')
        problems.push(`${where}: does not wait for ${dep} to be healthy`)
    }
    for (const [setting, target] of Object.entries(APPS[app].calls)) {
      for (const raw of (env[setting] ?? '').split(',').filter(Boolean)) {
        const url = new URL(raw)
        if (url.hostname !== target || Number(url.port || 80) !== ports[target as AppName]) {
          problems.push(
            `${where}: ${setting}=${raw} does not reach ${target} on port ${ports[target as AppName]}`,
          )
        }
      }
    }
    const serverPort: Record<ServerName, number> = { mongo: 27017, nats: 4222, redis: 6379 }
    for (const server of APPS[app].servers) {
      const raw = env[SERVER_SETTING[server]]
      if (!raw) continue
      const url = new URL(raw)
      if (url.hostname !== servers[server] || Number(url.port) !== serverPort[server]) {
        problems.push(`${where}: ${SERVER_SETTING[server]}=${raw} does not reach the ${server} service`)
      }
      if (server === 'mongo' && url.searchParams.get('replicaSet') !== replSet) {
        problems.push(`${where}: MONGO_URL does not name the replica set ${replSet}`)
      }
    }
    const published = service.ports ?? []
    if (app !== 'gateway' && published.length > 0)
      problems.push(`${where}: publishes ports; only the gateway should`)
    if (app === 'gateway') {
      const targets = published.map((p) =>
        typeof p === 'object' ? p.target : Number(String(p).split(':').pop()?.split('/')[0]),
      )
      if (targets.length !== 1 || targets[0] !== ports.gateway) {
        problems.push(
          `${where}: publishes ${targets.join(',') || 'nothing'}, but listens on ${ports.gateway}`,
        )
      }
    }
  }

  for (const use of project.uses) {
    if (use.fallback === 'none') problems.push(`compose: \${${use.name}} has no default`)
    if (use.fallback === 'error' && !mustChoose.includes(use.name)) {
      problems.push(`compose: \${${use.name}} is required; give it a default`)
    }
  }
  return problems
}
