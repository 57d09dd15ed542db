import { chmodSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'

/** What `login` remembers between commands (a file only its owner can read). */
export interface Session {
  url: string
  email: string
  accessToken: string
  refreshToken?: string
  organizationId: string | null
  /** When the access token expires (minutes); renewed with the refresh token. */
  expiresAt: string
  /** When the session (its refresh token) ends unless used: 30 days by default, restarted by each renewal. */
  sessionExpiresAt?: string
}

export function readSession(file: string): Session | null {
  try {
    const parsed = JSON.parse(readFileSync(file, 'utf8')) as Partial<Session>
    return typeof parsed.accessToken === 'string' && typeof parsed.url === 'string'
      ? (parsed as Session)
      : null
  } catch {
    return null
  }
}

/** Written whole then renamed into place: a `pm` run beside this one never reads half a file. */
export function writeSession(file: string, session: Session): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
  const temp = `${file}.${process.pid}.tmp`
  writeFileSync(temp, `${JSON.stringify(session, null, 2)}\n`, { mode: 0o600 })
  chmodSync(temp, 0o600)
  renameSync(temp, file)
}

export function clearSession(file: string): void {
  rmSync(file, { force: true })
}
