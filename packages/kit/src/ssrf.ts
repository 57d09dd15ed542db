/** The SSRF guard of outbound calls to user-given URLs: webhook deliveries and model provider base URLs. */
import { promises as dns, type LookupAddress, type LookupOptions } from 'node:dns'
import { BlockList, isIP, type LookupFunction } from 'node:net'
import { Agent } from 'undici'

export interface ResolvedAddress {
  address: string
  family: number
}

export type HostLookup = (host: string) => Promise<ResolvedAddress[]>

export type SsrfReason =
  | 'invalid_url'
  | 'unsupported_protocol'
  | 'credentials_in_url'
  | 'unresolvable_host'
  | 'non_public_address'

export class SsrfError extends Error {
  readonly reason: SsrfReason

  constructor(reason: SsrfReason, message: string) {
    super(message)
    this.name = 'SsrfError'
    this.reason = reason
  }
}

// Special-purpose IPv4 ranges (IANA registry) that must never be a webhook target.
const IPV4_BLOCKED: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8],
  ['10.0.0.0', 8],
  ['100.64.0.0', 10],
  ['127.0.0.0', 8],
  ['169.254.0.0', 16],
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.0.2.0', 24],
  ['192.88.99.0', 24], // deprecated 6to4 relay anycast
  ['192.168.0.0', 16],
  ['198.18.0.0', 15],
  ['198.51.100.0', 24],
  ['203.0.113.0', 24],
  ['224.0.0.0', 4],
  ['240.0.0.0', 4], // also covers 255.255.255.255
]

// Refused even inside 2000::/3, the only IPv6 block currently allocated for global unicast.
// Everything outside it (::, ::1, ::/96, fc00::/7, fe80::/10, ff00::/8, 100::/64, ...) is
// refused by the allow-list below, which also covers ranges nobody thought to list here.
const IPV6_BLOCKED: readonly (readonly [string, number])[] = [
  ['2001::', 32], // Teredo: the embedded client address is obfuscated, so it cannot be judged
  ['2001:2::', 48], // benchmarking
  ['2001:db8::', 32], // documentation
  ['3fff::', 20], // documentation (RFC 9637)
]

// Separate lists because BlockList matches IPv4 rules against IPv4-mapped IPv6 addresses and
// vice versa; embedded IPv4 addresses are extracted and judged explicitly instead.
const ipv4Blocked = new BlockList()
for (const [net, prefix] of IPV4_BLOCKED) ipv4Blocked.addSubnet(net, prefix, 'ipv4')
const ipv6Blocked = new BlockList()
for (const [net, prefix] of IPV6_BLOCKED) ipv6Blocked.addSubnet(net, prefix, 'ipv6')
const ipv6GlobalUnicast = new BlockList()
ipv6GlobalUnicast.addSubnet('2000::', 3, 'ipv6')

/** Parses a string already validated by `isIP(...) === 6` into its eight 16-bit groups. */
function ipv6Groups(ip: string): number[] {
  let text = ip
  const tail: number[] = []
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    tail.push((a << 8) | b, (c << 8) | d)
    text = text.slice(0, dotted.index)
    // "::1.2.3.4" leaves "::", "1::1.2.3.4" leaves "1::", "1:2:3:4:5:6:1.2.3.4" leaves a trailing ':'.
    if (text.endsWith(':') && !text.endsWith('::')) text = text.slice(0, -1)
  }
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((g) => Number.parseInt(g, 16)))
  const gap = text.indexOf('::')
  if (gap < 0) return [...parse(text), ...tail]
  const head = parse(text.slice(0, gap))
  const rest = [...parse(text.slice(gap + 2)), ...tail]
  return [...head, ...new Array<number>(8 - head.length - rest.length).fill(0), ...rest]
}

function ipv4FromGroups(high: number, low: number): string {
  return `${high >> 8}.${high & 0xff}.${low >> 8}.${low & 0xff}`
}

/**
 * The IPv4 address a packet to this IPv6 address ends up at, for the translation schemes
 * where that address is plain to see: IPv4-mapped (::ffff:0:0/96), NAT64 (64:ff9b::/96) and
 * 6to4 (2002::/16). A mapped ::ffff:7f00:1 is 127.0.0.1 on a dual-stack socket.
 */
function embeddedIPv4(groups: number[]): string | undefined {
  const g = (i: number) => groups[i] ?? 0
  const zeros = (from: number, to: number) => groups.slice(from, to).every((x) => x === 0)
  if (zeros(0, 5) && g(5) === 0xffff) return ipv4FromGroups(g(6), g(7))
  if (g(0) === 0x64 && g(1) === 0xff9b && zeros(2, 6)) return ipv4FromGroups(g(6), g(7))
  if (g(0) === 0x2002) return ipv4FromGroups(g(1), g(2))
  return undefined
}

/** True only for addresses a webhook or a provider call may reach: anything unparseable is refused. */
export function isPublicAddress(ip: string): boolean {
  const family = isIP(ip)
  if (family === 4) return !ipv4Blocked.check(ip, 'ipv4')
  // Zone ids (fe80::1%eth0) only appear on scoped, hence non-public, addresses.
  if (family !== 6 || ip.includes('%')) return false
  const embedded = embeddedIPv4(ipv6Groups(ip))
  if (embedded !== undefined) return isPublicAddress(embedded)
  return ipv6GlobalUnicast.check(ip, 'ipv6') && !ipv6Blocked.check(ip, 'ipv6')
}

const systemLookup: HostLookup = async (host) => {
  const found = await dns.lookup(host, { all: true, order: 'verbatim' })
  return found.map(({ address, family }) => ({ address, family }))
}

export interface CheckTargetOptions {
  /** For development and tests against local receivers: skips the address checks only. */
  allowPrivate: boolean
  /** Defaults to the system resolver (`dns.promises.lookup` with `all: true`). */
  lookup?: HostLookup
}

export interface CheckedTarget {
  url: URL
  /** Connect only to these (see `pinnedDispatcher`): they are the ones that were checked. */
  addresses: ResolvedAddress[]
}

/**
 * Refuses URLs that could reach the service's own network. Run it before every delivery, not
 * only at registration: DNS answers change. The WHATWG URL parser has already normalised
 * shorthand IPv4 forms (`http://2130706433/`, `http://0x7f.1/`) to dotted quads, so the
 * address checks see what a connection would actually use.
 */
export async function checkTargetUrl(url: string, options: CheckTargetOptions): Promise<CheckedTarget> {
  let parsed: URL
  try {
    parsed = new URL(url)
  } catch {
    throw new SsrfError('invalid_url', 'invalid URL')
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new SsrfError(
      'unsupported_protocol',
      `protocol ${parsed.protocol} is not allowed; use http or https`,
    )
  }
  if (parsed.username !== '' || parsed.password !== '') {
    throw new SsrfError('credentials_in_url', 'URLs must not contain credentials')
  }

  const host = parsed.hostname.startsWith('[') ? parsed.hostname.slice(1, -1) : parsed.hostname
  const literalFamily = isIP(host)
  let addresses: ResolvedAddress[]
  if (literalFamily !== 0) {
    addresses = [{ address: host, family: literalFamily }]
  } else {
    try {
      addresses = await (options.lookup ?? systemLookup)(host)
    } catch (err) {
      throw new SsrfError('unresolvable_host', `cannot resolve ${host}: ${(err as Error).message}`)
    }
    if (addresses.length === 0) throw new SsrfError('unresolvable_host', `cannot resolve ${host}`)
  }

  if (!options.allowPrivate) {
    // Every address, not just the first: the connection may use any of them.
    const refused = addresses.find((a) => !isPublicAddress(a.address))
    if (refused) {
      throw new SsrfError('non_public_address', `${host} resolves to non-public address ${refused.address}`)
    }
  }
  return { url: parsed, addresses }
}

/**
 * An undici dispatcher that connects only to `addresses`, whatever name the URL carries, so
 * nothing can re-resolve the host between the check and the connection (DNS rebinding).
 * undici passes `connect` options on to `net.connect`/`tls.connect`, which call `lookup`
 * instead of DNS; TLS still verifies the certificate against the URL's host name. IP-literal
 * hosts never reach `lookup`, and need not: the literal is the checked address. Use one
 * dispatcher per checked target and close it after the request.
 */
export function pinnedDispatcher(
  addresses: readonly ResolvedAddress[],
  options: { connectTimeoutMs?: number } = {},
): Agent {
  const pinned = addresses.map(({ address, family }) => ({ address, family }))
  const lookup: LookupFunction = (hostname: string, options: LookupOptions, callback) => {
    const wanted = options.family === 4 || options.family === 6 ? options.family : undefined
    const usable: LookupAddress[] = pinned.filter((a) => wanted === undefined || a.family === wanted)
    const first = usable[0]
    if (!first) {
      const err: NodeJS.ErrnoException = new Error(`no checked address for ${hostname}`)
      err.code = 'ENOTFOUND'
      callback(err, '')
      return
    }
    // net.connect asks for every address (all: true) when it races families (autoSelectFamily).
    if (options.all) callback(null, usable)
    else callback(null, first.address, first.family)
  }
  return new Agent({
    connect: {
      lookup,
      ...(options.connectTimeoutMs !== undefined ? { timeout: options.connectTimeoutMs } : {}),
    },
  })
}
