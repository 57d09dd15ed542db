import { PromptClient, PromptServiceError } from '@pm/client'
import { CSRF_HEADER, type LoginResponse, SESSION_HINT_COOKIE, type User } from '@pm/contracts'
import { useQuery } from '@tanstack/react-query'
import { useSyncExternalStore } from 'react'

/**
 * The browser session (DESIGN section 10). The access token lives in this module's memory
 * only; the refresh token never reaches JavaScript: the service sets it as an HttpOnly
 * cookie (login with `cookie: true`) that the browser sends to /api/v1/auth alone. Refresh
 * and logout carry the CSRF header. The token is renewed a minute before it expires, and at
 * start (so a reload keeps you signed in while the cookie is valid).
 */
export const client = new PromptClient({
  baseUrl: window.location.origin,
  // Bound: the client calls it as a method of its options object.
  fetch: (input, init) => window.fetch(input, init),
  // The dashboard wants the service's answer now; TanStack Query does the caching.
  cacheTtlMs: 0,
  retries: 1,
})

const CSRF = { [CSRF_HEADER]: '1' }
/** How long before expiry the access token is renewed. */
const REFRESH_MARGIN_MS = 60_000

export interface Session {
  user: User
  organizationId: string | null
}

export type SessionState =
  | { status: 'loading' }
  | { status: 'signed-out' }
  | ({ status: 'signed-in' } & Session)

class SessionStore {
  private state: SessionState = { status: 'loading' }
  private readonly listeners = new Set<() => void>()
  private timer: ReturnType<typeof setTimeout> | undefined
  private expiresAt = 0
  private token: string | undefined
  /** The current access token, for the one call the typed client does not make: a streamed run. */
  readonly accessToken = (): string | undefined => this.token
  /** Called when who is signed in, or where, changes (the query cache is dropped). */
  onIdentityChange: () => void = () => {}

  readonly subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  readonly getState = (): SessionState => this.state

  private set(state: SessionState): void {
    this.state = state
    for (const listener of this.listeners) listener()
  }

  /**
   * With `identityChanged`, the query cache is dropped before the new state is published:
   * dropped after, it would cancel the queries the pages have just started for the new
   * identity and leave them pending for good.
   */
  private adopt(session: LoginResponse, identityChanged = false): void {
    client.setAccessToken(session.accessToken, session.organizationId)
    this.token = session.accessToken
    this.expiresAt = Date.now() + session.expiresIn * 1000
    clearTimeout(this.timer)
    this.timer = setTimeout(
      () => {
        this.refresh().catch(() => {})
      },
      Math.max(5_000, session.expiresIn * 1000 - REFRESH_MARGIN_MS),
    )
    if (identityChanged) this.onIdentityChange()
    this.set({ status: 'signed-in', user: session.user, organizationId: session.organizationId })
  }

  private drop(): void {
    clearTimeout(this.timer)
    this.expiresAt = 0
    client.setAccessToken(undefined, null)
    this.token = undefined
    this.set({ status: 'signed-out' })
  }

  /** Exchanges the cookie for a fresh access token (optionally in another organization). */
  async refresh(organizationId?: string): Promise<void> {
    try {
      // One refresh at a time across this origin's tabs: two tabs sending the same cookie at
      // once would look like a replayed token and end the session. The second waits, then
      // sends the cookie the first one received.
      const exchange = () =>
        client.api.refreshToken({ body: organizationId ? { organizationId } : {}, headers: CSRF })
      this.adopt(
        navigator.locks ? await navigator.locks.request('pm-session-refresh', exchange) : await exchange(),
        organizationId !== undefined,
      )
    } catch (err) {
      // A refused or missing cookie ends the session; a network failure keeps the current
      // token (the next try may work) unless there is none.
      const refused = err instanceof PromptServiceError && (err.status === 401 || err.status === 400)
      if (refused || this.expiresAt === 0) this.drop()
      throw err
    }
  }

  /** At start, and when a hidden tab (whose timers are throttled) comes back. */
  start(): void {
    // The hint cookie (no secret) says whether a refresh cookie may exist; without it there
    // is nothing to refresh and no request is sent.
    const hinted = document.cookie.split('; ').includes(`${SESSION_HINT_COOKIE}=1`)
    if (hinted) this.refresh().catch(() => {})
    else this.set({ status: 'signed-out' })
    document.addEventListener('visibilitychange', () => {
      const due = this.expiresAt !== 0 && Date.now() > this.expiresAt - REFRESH_MARGIN_MS
      if (document.visibilityState === 'visible' && due) this.refresh().catch(() => {})
    })
  }

  async signIn(email: string, password: string): Promise<void> {
    this.adopt(await client.api.login({ body: { email, password, cookie: true } }), true)
  }

  async signUp(input: { email: string; password: string; name: string }): Promise<void> {
    this.adopt(await client.api.register({ body: { ...input, cookie: true } }), true)
  }

  async signOut(): Promise<void> {
    try {
      await client.api.logout({ body: {}, headers: CSRF })
    } finally {
      this.drop()
      this.onIdentityChange()
    }
  }

  async switchOrganization(organizationId: string): Promise<void> {
    await this.refresh(organizationId)
  }
}

export const session = new SessionStore()

export function useSession(): SessionState {
  return useSyncExternalStore(session.subscribe, session.getState)
}

/** The signed-in session; routes that use it render only when there is one. */
export function useSignedIn(): Session {
  const state = useSession()
  if (state.status !== 'signed-in') throw new Error('not signed in')
  return state
}

/** The query key of the signed-in user's organizations: a rename or a new one refreshes it. */
export const organizationsKey = ['organizations'] as const

/** The organizations the signed-in user belongs to (the switcher, settings, fork targets). */
export function useOrganizations() {
  return useQuery({ queryKey: organizationsKey, queryFn: () => client.api.listOrganizations() })
}

/** The query key of one organization (its settings, its protected environments). */
export const organizationKey = (organizationId: string | null) => ['organization', organizationId] as const

/** One organization: its name and protected environments (readable by every member). */
export function useOrganization(organizationId: string | null) {
  return useQuery({
    queryKey: organizationKey(organizationId),
    queryFn: () => client.api.getOrganization({ params: { id: organizationId ?? '' } }),
    enabled: organizationId !== null,
  })
}
