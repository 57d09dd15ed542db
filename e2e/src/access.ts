import { type ChildProcess, spawn } from 'node:child_process'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import {
  freePort,
  type ProcessResult,
  REPO_ROOT,
  type RunningProcess,
  runEntry,
  startProcess,
  waitForHttp,
} from '@pm/testkit'
import { importJWK, type JWK, SignJWT } from 'jose'
import { call, type Reply } from './client.ts'
import type { Stack } from './stack.ts'

/** Helpers of the identity and access tests (gateway replicas, Redis, CLI, JWTs). */

export interface ErrorReply {
  error: { code: string; message: string; requestId: string }
}

/**
 * Calls the API and keeps every response body, so a test can show that a secret, once
 * shown at creation, appears in no later response.
 */
export class Recorder {
  readonly bodies: string[] = []

  async call<T = unknown>(
    base: string,
    method: string,
    path: string,
    opts: { token?: string; body?: unknown; headers?: Record<string, string> } = {},
  ): Promise<Reply<T>> {
    const reply = await call<T>(base, method, path, opts)
    this.bodies.push(typeof reply.body === 'string' ? reply.body : JSON.stringify(reply.body))
    return reply
  }

  /** Position after the last recorded response (a secret "created" there). */
  mark(): number {
    return this.bodies.length
  }

  /** Responses recorded after `from` that contain `secret`. */
  leaksAfter(from: number, secret: string): string[] {
    return this.bodies.slice(from).filter((b) => b.includes(secret))
  }
}

/** A further gateway process on the stack's settings (another replica), listening on its own port. */
export async function startGateway(
  stack: Stack,
  extraEnv: Record<string, string> = {},
  opts: { readyPath?: string; scheme?: 'http' | 'https' } = {},
): Promise<{ url: string; process: RunningProcess }> {
  const port = await freePort()
  const proc = startProcess('gateway', join(REPO_ROOT, 'apps/gateway/src/server.ts'), {
    ...stack.env,
    ...extraEnv,
    PORT: String(port),
  })
  // The readiness probe is exempt from HTTPS; over TLS it is polled by the caller.
  if (opts.scheme !== 'https') {
    await waitForHttp(`http://127.0.0.1:${port}${opts.readyPath ?? '/health/ready'}`, 90_000, proc)
  }
  return { url: `${opts.scheme ?? 'http'}://127.0.0.1:${port}`, process: proc }
}

/** A private redis-server the test may stop and start (never the machine's shared one). */
export class RedisServer {
  readonly port: number
  private child: ChildProcess | undefined
  private output = ''

  private constructor(port: number) {
    this.port = port
  }

  static async start(): Promise<RedisServer> {
    const server = new RedisServer(await freePort())
    await server.start()
    return server
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`
  }

  async start(): Promise<void> {
    const child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    )
    this.child = child
    child.stdout?.on('data', (d: Buffer) => {
      this.output += d.toString()
    })
    child.stderr?.on('data', (d: Buffer) => {
      this.output += d.toString()
    })
    const deadline = Date.now() + 10_000
    while (!this.output.includes('Ready to accept connections')) {
      if (child.exitCode !== null) throw new Error(`redis-server exited: ${this.output}`)
      if (Date.now() > deadline) throw new Error(`redis-server did not start: ${this.output}`)
      await new Promise((r) => setTimeout(r, 20))
    }
  }

  /** Sends a command with redis-cli and returns its output. */
  async cli(...args: string[]): Promise<string> {
    const child = spawn('redis-cli', ['-p', String(this.port), ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
    })
    let out = ''
    child.stdout?.on('data', (d: Buffer) => {
      out += d.toString()
    })
    await new Promise<void>((resolve) => child.once('exit', () => resolve()))
    return out
  }

  async stop(): Promise<void> {
    const child = this.child
    if (!child || child.exitCode !== null || child.signalCode !== null) return
    const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
    child.kill('SIGKILL')
    await exited
    this.output = ''
  }
}

/** Runs the identity CLI as a process; resolves with its status and output. */
export function runIdentityCli(
  args: string[],
  env: Record<string, string>,
  stdin = '',
): Promise<ProcessResult> {
  return runEntry(join(REPO_ROOT, 'apps/identity/src/cli.ts'), args, env, stdin)
}

/**
 * identity's current signing key, read from its SQLite file: lets a test sign tokens that
 * only the key's owner could sign (expired, wrong audience, ...).
 */
export function identitySigningKey(dataDir: string): { kid: string; privateJwk: JWK } {
  const db = new DatabaseSync(join(dataDir, 'identity.db'), { readOnly: true })
  try {
    const row = db
      .prepare('SELECT kid, private_jwk FROM signing_keys ORDER BY created_at DESC LIMIT 1')
      .get() as { kid: string; private_jwk: string } | undefined
    if (!row) throw new Error('identity has no signing key')
    return { kid: row.kid, privateJwk: JSON.parse(row.private_jwk) as JWK }
  } finally {
    db.close()
  }
}

export interface JwtClaims {
  sub: string
  org?: string
  iss?: string
  aud?: string
  iat?: number
  exp?: number
}

/** Signs an ES256 JWT with the given private JWK (identity's own, or a stranger's). */
export async function signJwt(privateJwk: JWK, kid: string, claims: JwtClaims): Promise<string> {
  const now = Math.floor(Date.now() / 1000)
  const key = await importJWK(privateJwk, 'ES256')
  return new SignJWT({ ...(claims.org ? { org: claims.org } : {}) })
    .setProtectedHeader({ alg: 'ES256', kid, typ: 'JWT' })
    .setSubject(claims.sub)
    .setIssuer(claims.iss ?? 'prompt-service')
    .setAudience(claims.aud ?? 'prompt-service-api')
    .setIssuedAt(claims.iat ?? now)
    .setExpirationTime(claims.exp ?? now + 300)
    .setJti(crypto.randomUUID())
    .sign(key)
}

/** A token with `alg: none` (no signature), as an attacker would write it. */
export function unsignedJwt(claims: JwtClaims): string {
  const now = Math.floor(Date.now() / 1000)
  const enc = (v: object) => Buffer.from(JSON.stringify(v)).toString('base64url')
  return `${enc({ alg: 'none', typ: 'JWT' })}.${enc({
    iss: 'prompt-service',
    aud: 'prompt-service-api',
    iat: now,
    exp: now + 300,
    ...claims,
  })}.`
}

/** A random address to send as X-Forwarded-For, so per-IP limits of one test touch no other. */
export function randomIp(): string {
  const b = () => Math.floor(Math.random() * 250) + 1
  return `10.${b()}.${b()}.${b()}`
}
