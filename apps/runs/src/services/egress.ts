import { AppError } from '@pm/contracts'
import { checkTargetUrl, type HostLookup, pinnedDispatcher, SsrfError } from '@pm/kit'
import { Agent, fetch as undiciFetch } from 'undici'

/**
 * Redirects are not followed: undici would send the prompt and the connection's headers (an
 * Azure `api-key`) to wherever a provider points, an internal address included, past every
 * check above. `manual` hands the 3xx to the SDK, which fails the call with its status
 * (`providerFailure` says it was a redirect), as the webhooks' deliveries do.
 */
const NO_REDIRECTS = { redirect: 'manual' } as const

/**
 * Where model calls may go (DESIGN section 13, "Egress"): a connection's base URL passes the
 * webhooks' SSRF guard (https, public addresses only), checked when the connection is saved and
 * again before every call (DNS answers change; the call connects only to the checked addresses),
 * unless its host is in PROVIDER_ALLOWED_HOSTS, which may also be private and use http.
 */
export class Egress {
  private readonly allowed: Set<string>
  /** For the providers' own APIs and allowed hosts: one pool, the connect deadline set. */
  private readonly shared: Agent

  private readonly connectTimeoutMs: number
  private readonly lookup: HostLookup | undefined

  constructor(allowedHosts: string, connectTimeoutMs: number, lookup?: HostLookup) {
    this.connectTimeoutMs = connectTimeoutMs
    this.lookup = lookup
    this.allowed = new Set(
      allowedHosts
        .split(',')
        .map((h) => normalizeHost(h.trim()))
        .filter(Boolean),
    )
    this.shared = new Agent({ connect: { timeout: connectTimeoutMs }, keepAliveTimeout: 30_000 })
  }

  private isAllowed(url: URL): boolean {
    return this.allowed.has(normalizeHost(url.hostname))
  }

  /** 400 VALIDATION_ERROR unless the base URL may be called; answers it normalized. */
  async checkBaseUrl(baseUrl: string): Promise<string> {
    let url: URL
    try {
      url = new URL(baseUrl)
    } catch {
      throw invalidBaseUrl('not a valid URL')
    }
    if (url.username || url.password) throw invalidBaseUrl('must not contain credentials')
    if (url.search || url.hash) throw invalidBaseUrl('must not have a query or a fragment')
    if (this.isAllowed(url)) {
      if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalidBaseUrl('must be http or https')
      return url.toString().replace(/\/$/, '')
    }
    if (url.protocol !== 'https:') {
      throw invalidBaseUrl('must be https (plain http only for a host in PROVIDER_ALLOWED_HOSTS)')
    }
    try {
      await checkTargetUrl(url.toString(), {
        allowPrivate: false,
        ...(this.lookup ? { lookup: this.lookup } : {}),
      })
    } catch (err) {
      if (err instanceof SsrfError) {
        throw invalidBaseUrl(
          err.reason === 'non_public_address'
            ? 'resolves to a private or reserved address (list the host in PROVIDER_ALLOWED_HOSTS to allow it)'
            : err.message,
        )
      }
      throw err
    }
    return url.toString().replace(/\/$/, '')
  }

  /**
   * The fetch and options for one call to `baseUrl` (null: the provider's own API). `release`
   * closes a dispatcher made for this call only.
   */
  async dispatcherFor(baseUrl: string | null): Promise<{
    fetch: typeof globalThis.fetch
    fetchOptions: Record<string, unknown>
    /** A dispatcher for this call only (pinned to the addresses just checked). */
    pinned: boolean
    release: () => void
  }> {
    const fetch = undiciFetch as unknown as typeof globalThis.fetch
    if (baseUrl === null || this.isAllowed(new URL(baseUrl))) {
      return {
        fetch,
        fetchOptions: { dispatcher: this.shared, ...NO_REDIRECTS },
        pinned: false,
        release: () => {},
      }
    }
    let addresses: Awaited<ReturnType<typeof checkTargetUrl>>['addresses']
    let timer: NodeJS.Timeout | undefined
    try {
      // The lookup comes before the call's deadline starts: the connect timeout bounds it, as it
      // bounds a connection. One that does not answer is left to finish in the background (a
      // system lookup cannot be cancelled), its answer unused.
      const slow = new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(lookupTimedOut(baseUrl, this.connectTimeoutMs)),
          this.connectTimeoutMs,
        )
        timer.unref()
      })
      ;({ addresses } = await Promise.race([
        checkTargetUrl(baseUrl, {
          allowPrivate: false,
          ...(this.lookup ? { lookup: this.lookup } : {}),
        }),
        slow,
      ]))
    } catch (err) {
      if (err instanceof SsrfError) {
        throw new AppError('PROVIDER_ERROR', "the connection's base URL is not allowed now", {
          providerStatus: null,
          message: err.reason === 'non_public_address' ? 'resolves to a non-public address' : err.message,
        })
      }
      throw err
    } finally {
      clearTimeout(timer)
    }
    const dispatcher = pinnedDispatcher(addresses, { connectTimeoutMs: this.connectTimeoutMs })
    return {
      fetch,
      fetchOptions: { dispatcher, ...NO_REDIRECTS },
      pinned: true,
      release: () => {
        dispatcher.close().catch(() => {})
      },
    }
  }

  async close(): Promise<void> {
    await this.shared.close()
  }
}

function normalizeHost(host: string): string {
  const h = host.toLowerCase()
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h
}

/** As a connection past RUN_CONNECT_TIMEOUT_MS is answered (`providerFailure`): 504 PROVIDER_TIMEOUT. */
function lookupTimedOut(baseUrl: string, timeoutMs: number): AppError {
  return new AppError('PROVIDER_TIMEOUT', 'the model provider did not answer in time', {
    timeoutMs,
    message: `resolving ${new URL(baseUrl).hostname} took longer than RUN_CONNECT_TIMEOUT_MS`,
  })
}

function invalidBaseUrl(message: string): AppError {
  return new AppError('VALIDATION_ERROR', `baseUrl ${message}`, [{ path: '/body/baseUrl', message }])
}
