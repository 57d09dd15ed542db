import { homedir } from 'node:os'
import { join } from 'node:path'

export type Env = Record<string, string | undefined>

/** The CLI's settings: flags win over these environment variables. */
export interface CliSettings {
  /** The gateway (PM_URL, default http://localhost:8080). */
  url: string | undefined
  /** An API key to use instead of a login session (PM_API_KEY). */
  apiKey: string | undefined
  /** A user access token to use instead of a login session (PM_TOKEN). */
  token: string | undefined
  /** The organization a user token acts in (PM_ORG). */
  organizationId: string | undefined
  /** Password for login / init without a flag (PM_PASSWORD). */
  password: string | undefined
  /** Where `login` keeps the session (PM_CONFIG). */
  sessionFile: string
  /** The environment, for `init`, which opens the identity store like the service does. */
  env: Env
}

/** The one place that reads the environment. */
export function loadSettings(env: Env): CliSettings {
  const configHome = env.XDG_CONFIG_HOME || join(env.HOME || homedir(), '.config')
  return {
    url: env.PM_URL || undefined,
    apiKey: env.PM_API_KEY || undefined,
    token: env.PM_TOKEN || undefined,
    organizationId: env.PM_ORG || undefined,
    password: env.PM_PASSWORD || undefined,
    sessionFile: env.PM_CONFIG || join(configHome, 'prompt-service', 'session.json'),
    env,
  }
}

export const DEFAULT_URL = 'http://localhost:8080'
