import { GatewayConfigSchema } from '@pm/gateway'
import { IdentityConfigSchema } from '@pm/identity'
import { ExperimentsConfigSchema } from '@pm/experiments'
import { loadConfig, loadSecretBox } from '@pm/kit'
import { PromptsConfigSchema } from '@pm/prompts'
import { RenderConfigSchema } from '@pm/render'
import { RunsConfigSchema } from '@pm/runs'
import { WebhooksConfigSchema } from '@pm/webhooks'
import type { TObject } from '@sinclair/typebox'

export type AppName = 'gateway' | 'identity' | 'prompts' | 'render' | 'webhooks' | 'runs' | 'experiments'
export type ServerName = 'mongo' | 'nats' | 'redis'

export interface AppSpec {
  name: AppName
  /** The app's config schema, as exported by its package: the one truth about its settings. */
  schema: TObject
  /** Settings that hold the base URL of another app (RENDER_URLS may hold several). */
  calls: Partial<Record<string, AppName>>
  /** The servers the app uses in the distributed mode. */
  servers: ServerName[]
  /**
   * Reaches hosts on the public internet, never private addresses: on any port (webhook
   * deliveries: a subscriber's URL may name one), or on HTTPS only (model providers).
   */
  internet: 'any-port' | 'https' | false
  /** Settings the schema leaves optional that the distributed mode requires (the app refuses to start without them). */
  needs?: string[]
}

/** Who calls whom, and which servers each app needs (docs/architecture.md). */
export const APPS: Record<AppName, AppSpec> = {
  gateway: {
    name: 'gateway',
    schema: GatewayConfigSchema,
    calls: {
      IDENTITY_URL: 'identity',
      PROMPTS_URL: 'prompts',
      RENDER_URLS: 'render',
      WEBHOOKS_URL: 'webhooks',
      RUNS_URL: 'runs',
      EXPERIMENTS_URL: 'experiments',
    },
    servers: ['nats', 'redis'],
    internet: false,
  },
  identity: {
    name: 'identity',
    schema: IdentityConfigSchema,
    calls: {},
    servers: ['nats', 'mongo'],
    internet: false,
  },
  prompts: {
    name: 'prompts',
    schema: PromptsConfigSchema,
    calls: { IDENTITY_URL: 'identity' },
    servers: ['nats', 'mongo'],
    internet: false,
  },
  render: {
    name: 'render',
    schema: RenderConfigSchema,
    calls: { PROMPTS_URL: 'prompts' },
    servers: ['nats'],
    internet: false,
  },
  webhooks: {
    name: 'webhooks',
    schema: WebhooksConfigSchema,
    calls: {},
    servers: ['nats', 'mongo'],
    internet: 'any-port',
    // Seals the webhook signing secrets at rest (docs/operations.md, "Secrets at rest").
    needs: ['SECRETS_KEY'],
  },
  runs: {
    name: 'runs',
    schema: RunsConfigSchema,
    // Renders through render's invoke/inject; asks prompts for a draft's prompt by slug.
    calls: { RENDER_URL: 'render', PROMPTS_URL: 'prompts' },
    // NATS: the audit entries of connection changes (durable, to prompts); no other event.
    servers: ['nats', 'mongo'],
    // Model providers (OpenAI, Anthropic, compatible APIs) over HTTPS.
    internet: 'https',
    // Seals the provider API keys at rest; required with MONGO_URL.
    needs: ['SECRETS_KEY'],
  },
  experiments: {
    name: 'experiments',
    schema: ExperimentsConfigSchema,
    // Variants checked against prompts; each unit is one run on the runs service.
    calls: { PROMPTS_URL: 'prompts', RUNS_URL: 'runs' },
    // NATS: the JetStream work queue of experiments, experiment.completed, and the audit entries.
    servers: ['nats', 'mongo'],
    internet: false,
  },
}

export const APP_NAMES = Object.keys(APPS) as AppName[]

/** The setting that points an app at each server. */
export const SERVER_SETTING: Record<ServerName, string> = {
  mongo: 'MONGO_URL',
  nats: 'NATS_URL',
  redis: 'REDIS_URL',
}

/** The apps that call `target` (the gateway is called by the ingress, outside this list). */
export function callersOf(target: AppName): AppName[] {
  return APP_NAMES.filter((name) => Object.values(APPS[name].calls).includes(target))
}

/** The port an app listens on when PORT is not set: the default in its schema. */
export function defaultPort(app: AppSpec): number {
  const port = (app.schema.properties.PORT as { default?: unknown } | undefined)?.default
  if (typeof port !== 'number') throw new Error(`${app.name}: its schema has no PORT default`)
  return port
}

/** Settings the schema requires and does not default: the process refuses to start without them. */
export function requiredSettings(schema: TObject): string[] {
  return (schema.required ?? []).filter(
    (key) => (schema.properties[key] as { default?: unknown } | undefined)?.default === undefined,
  )
}

/**
 * Settings an app needs in the distributed mode: what its schema requires, plus the servers'
 * URLs and the URLs of the apps it calls (their defaults point at 127.0.0.1, which is right
 * for one machine only).
 */
export function neededSettings(app: AppSpec): string[] {
  return [
    ...new Set([
      ...requiredSettings(app.schema),
      ...(app.needs ?? []),
      ...app.servers.map((s) => SERVER_SETTING[s]),
      ...Object.keys(app.calls),
    ]),
  ].sort()
}

export interface SettingsCheck {
  problems: string[]
  /** The port the app would listen on with these settings, when they load. */
  port?: number
  config?: Record<string, unknown>
}

/**
 * Checks the environment a deployment gives an app: every needed setting present and not
 * empty, no key the app does not know (a typo would be silently ignored), and the whole set
 * accepted by the app's own loadConfig (types, patterns, minimum lengths).
 */
export function checkSettings(app: AppSpec, env: Record<string, string>, where: string): SettingsCheck {
  const problems: string[] = []
  for (const key of neededSettings(app)) {
    if (env[key] === undefined || env[key] === '')
      problems.push(`${where}: ${app.name} needs ${key}, not provided`)
  }
  for (const key of Object.keys(env)) {
    if (!(key in app.schema.properties)) problems.push(`${where}: ${key} is not a setting of ${app.name}`)
  }
  try {
    const config = loadConfig(app.schema, env) as Record<string, unknown>
    // The secrets key is checked as the app checks it at start (32 bytes, base64).
    if ('SECRETS_KEY' in app.schema.properties) loadSecretBox(config)
    return { problems, port: config.PORT as number, config }
  } catch (err) {
    problems.push(`${where}: ${app.name} would not start: ${(err as Error).message}`)
    return { problems }
  }
}
