import { busSettings, commonSettings, loadConfig } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

const url = (fallback: string) => Type.String({ pattern: '^https?://', default: fallback })

export const GatewayConfigSchema = Type.Object({
  ...commonSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 8080 }),
  IDENTITY_URL: url('http://127.0.0.1:4001'),
  PROMPTS_URL: url('http://127.0.0.1:4002'),
  /** One or more render replicas, comma-separated: the gateway spreads traffic over them. */
  RENDER_URLS: Type.String({
    pattern: '^https?://[^,\\s]+(,https?://[^,\\s]+)*$',
    default: 'http://127.0.0.1:4003',
  }),
  WEBHOOKS_URL: url('http://127.0.0.1:4004'),
  /**
   * The runs service (DESIGN section 13) and datasets and experiments (section 14): optional in
   * the distributed mode. Unset, their routes answer 503 SERVICE_UNAVAILABLE saying so, and the
   * gateway's readiness does not wait for them (a deployment without model egress still serves
   * prompts). The embedded default always sets both.
   */
  EXPERIMENTS_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  RUNS_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  REDIS_URL: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  JWT_ISSUER: Type.String({ default: 'prompt-service' }),
  JWT_AUDIENCE: Type.String({ default: 'prompt-service-api' }),
  /**
   * How far past its `exp` (and before its `iat`) an access token is still accepted: clocks of
   * the gateway and identity machines may disagree by this much. 0 only where both run on one
   * clock (a test of expiry waits for the token's lifetime plus this).
   */
  JWT_CLOCK_TOLERANCE_SECONDS: Type.Integer({ minimum: 0, maximum: 300, default: 30 }),
  /** Plain HTTP is refused unless this is false; defaults to true in production. */
  REQUIRE_HTTPS: Type.Optional(Type.Boolean()),
  TLS_CERT_FILE: Type.Optional(Type.String()),
  TLS_KEY_FILE: Type.Optional(Type.String()),
  /** Proxies whose X-Forwarded-* headers are believed: comma-separated addresses or CIDRs. */
  TRUSTED_PROXIES: Type.Optional(Type.String()),
  API_KEY_CACHE_TTL_MS: Type.Integer({ minimum: 0, default: 30_000 }),
  MEMBERSHIP_CACHE_TTL_MS: Type.Integer({ minimum: 0, default: 10_000 }),
  RATE_LIMIT_KEY_POINTS: Type.Integer({ minimum: 1, default: 600 }),
  RATE_LIMIT_KEY_DURATION_S: Type.Integer({ minimum: 1, default: 60 }),
  RATE_LIMIT_LOGIN_EMAIL_POINTS: Type.Integer({ minimum: 1, default: 10 }),
  RATE_LIMIT_LOGIN_IP_POINTS: Type.Integer({ minimum: 1, default: 100 }),
  RATE_LIMIT_LOGIN_DURATION_S: Type.Integer({ minimum: 1, default: 60 }),
  /**
   * Failed API-key lookups (well-formed keys that do not exist) per client IP and window: past
   * this, keys from that IP are refused with 429 without asking identity (issue 14, finding 9).
   */
  RATE_LIMIT_BAD_KEY_IP_POINTS: Type.Integer({ minimum: 1, default: 30 }),
  RATE_LIMIT_BAD_KEY_DURATION_S: Type.Integer({ minimum: 1, default: 60 }),
  RATE_LIMIT_PUBLIC_POINTS: Type.Integer({ minimum: 1, default: 300 }),
  RATE_LIMIT_PUBLIC_DURATION_S: Type.Integer({ minimum: 1, default: 60 }),
  /** The built dashboard (index.html and assets/); default: the @pm/dashboard package's dist/. */
  DASHBOARD_DIR: Type.Optional(Type.String({ minLength: 1 })),
  /** Browser origins allowed to call the API (comma-separated scheme://host[:port]); none by default. */
  CORS_ORIGINS: Type.Optional(
    Type.String({ pattern: '^\\s*https?://[^,/\\s]+/?\\s*(,\\s*https?://[^,/\\s]+/?\\s*)*$' }),
  ),
  UPSTREAM_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 30_000 }),
  /**
   * Requests one connection to a service carries before the gateway closes it and opens another
   * (0: no limit). Behind a Kubernetes Service, which balances per connection, this is how
   * replicas that an autoscaler adds get their share of keep-alive traffic: within seconds,
   * instead of only when the gateway needs more connections than it holds.
   */
  UPSTREAM_MAX_REQUESTS_PER_CONNECTION: Type.Integer({ minimum: 0, maximum: 1_000_000, default: 1_000 }),
  /**
   * The runs service's routes only: a model's answer takes longer than any other upstream's, so
   * this must exceed the runs service's RUN_TIMEOUT_MS (120 s by default), letting it answer its
   * own 504 PROVIDER_TIMEOUT; for a stream it bounds the wait between two chunks.
   */
  RUNS_UPSTREAM_TIMEOUT_MS: Type.Integer({ minimum: 100, default: 150_000 }),
})
export type GatewayConfig = Static<typeof GatewayConfigSchema>

export function loadGatewayConfig(env?: Record<string, string | undefined>): GatewayConfig {
  return loadConfig(GatewayConfigSchema, env)
}
