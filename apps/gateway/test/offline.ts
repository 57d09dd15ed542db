import { randomBytes } from 'node:crypto'
import { loadGatewayConfig } from '../src/app.ts'
import type { GatewayConfig } from '../src/config.ts'

/**
 * A test gateway's settings with upstreams nobody listens on (port 9): for what the gateway
 * decides itself (CORS, the order of refusals, its timeouts), which nothing may proxy.
 */
export function offlineConfig(env: Record<string, string> = {}): GatewayConfig {
  return loadGatewayConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    IDENTITY_URL: 'http://127.0.0.1:9',
    PROMPTS_URL: 'http://127.0.0.1:9',
    RENDER_URLS: 'http://127.0.0.1:9',
    WEBHOOKS_URL: 'http://127.0.0.1:9',
    ...env,
  })
}
