import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { request } from 'undici'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  checkTargetUrl,
  type HostLookup,
  isPublicAddress,
  pinnedDispatcher,
  type ResolvedAddress,
  SsrfError,
} from './ssrf.ts'

const fixed =
  (...addresses: string[]): HostLookup =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }))

const failingLookup: HostLookup = async (host) => {
  throw new Error(`test must not resolve ${host}`)
}

async function refusal(url: string, lookup: HostLookup = failingLookup): Promise<SsrfError> {
  const err = await checkTargetUrl(url, { allowPrivate: false, lookup }).then(
    () => undefined,
    (e: unknown) => e,
  )
  if (!(err instanceof SsrfError)) throw new Error(`expected ${url} to be refused, got ${String(err)}`)
  return err
}

describe('isPublicAddress', () => {
  it.each([
    '0.0.0.0',
    '0.1.2.3',
    '10.0.0.1',
    '100.64.0.1',
    '100.127.255.255',
    '127.0.0.1',
    '127.255.255.254',
    '169.254.169.254',
    '172.16.0.1',
    '172.31.255.255',
    '192.0.0.8',
    '192.0.2.1',
    '192.168.1.1',
    '198.18.0.1',
    '198.19.255.255',
    '198.51.100.7',
    '203.0.113.9',
    '224.0.0.1',
    '239.255.255.250',
    '240.0.0.1',
    '255.255.255.255',
    '::',
    '::1',
    'fc00::1',
    'fd12:3456::1',
    'fe80::1',
    'febf::1',
    'fe80::1%eth0',
    'ff02::1',
    '::ffff:127.0.0.1',
    '::ffff:7f00:1',
    '::ffff:10.0.0.1',
    '::ffff:a9fe:a9fe',
    '0:0:0:0:0:ffff:c0a8:101',
    '64:ff9b::7f00:1',
    '64:ff9b::10.1.2.3',
    '64:ff9b:1::808:808',
    '2001:db8::1',
    '2001::1',
    '2002:7f00:1::1',
    '2002:a00:1::',
    '::7f00:1',
    '::8.8.8.8',
    '100::1',
    'not an ip',
    '',
    '010.0.0.1',
  ])('refuses %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(false)
  })

  it.each([
    '1.1.1.1',
    '8.8.8.8',
    '93.184.216.34',
    '100.63.255.255',
    '100.128.0.0',
    '172.15.255.255',
    '172.32.0.0',
    '192.0.1.1',
    '198.17.255.255',
    '198.20.0.0',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2a00:1450:4001:80e::200e',
    '::ffff:8.8.8.8',
    '::ffff:808:808',
    '64:ff9b::808:808',
    '2002:808:808::1',
  ])('accepts %s', (ip) => {
    expect(isPublicAddress(ip)).toBe(true)
  })
})

describe('checkTargetUrl', () => {
  it.each([
    'http://127.0.0.1/hook',
    'http://10.0.0.1/',
    'http://169.254.169.254/latest/meta-data/',
    'http://[::1]:8080/',
    'http://[::ffff:127.0.0.1]/',
    'http://[::ffff:7f00:1]/',
    'http://2130706433/',
    'http://0x7f.1/',
    'http://0177.0.0.1/',
    'https://127.1/',
    'http://[fe80::1]/',
    'http://0/',
  ])('refuses the literal %s without resolving anything', async (url) => {
    expect((await refusal(url)).reason).toBe('non_public_address')
  })

  it('refuses a name that resolves to a private address', async () => {
    const err = await refusal('https://internal.example/hook', fixed('10.1.2.3'))
    expect(err.reason).toBe('non_public_address')
    expect(err).toBeInstanceOf(Error)
  })

  it('refuses a name when any one of its addresses is private', async () => {
    const err = await refusal('https://mixed.example/', fixed('93.184.216.34', '::ffff:192.168.0.1'))
    expect(err.reason).toBe('non_public_address')
  })

  it('accepts a name resolving to public addresses and returns them', async () => {
    const target = await checkTargetUrl('https://example.com/hooks?x=1', {
      allowPrivate: false,
      lookup: fixed('93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946'),
    })
    expect(target.url.href).toBe('https://example.com/hooks?x=1')
    expect(target.addresses).toEqual([
      { address: '93.184.216.34', family: 4 },
      { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
    ])
  })

  it('accepts a public IP literal without resolving it', async () => {
    const target = await checkTargetUrl('http://93.184.216.34:8080/', {
      allowPrivate: false,
      lookup: failingLookup,
    })
    expect(target.addresses).toEqual([{ address: '93.184.216.34', family: 4 }])
  })

  it('passes the bare host name, without brackets or port, to lookup', async () => {
    const seen: string[] = []
    await checkTargetUrl('https://Example.COM:8443/a', {
      allowPrivate: false,
      lookup: async (host) => {
        seen.push(host)
        return [{ address: '93.184.216.34', family: 4 }]
      },
    })
    expect(seen).toEqual(['example.com'])
  })

  it.each(['ftp://example.com/', 'file:///etc/passwd', 'gopher://example.com/', 'javascript:alert(1)'])(
    'refuses the non-http URL %s',
    async (url) => {
      expect((await refusal(url)).reason).toBe('unsupported_protocol')
    },
  )

  it('refuses credentials in the URL', async () => {
    expect((await refusal('https://user:pw@example.com/', fixed('93.184.216.34'))).reason).toBe(
      'credentials_in_url',
    )
    expect((await refusal('https://user@example.com/', fixed('93.184.216.34'))).reason).toBe(
      'credentials_in_url',
    )
  })

  it('refuses unparseable URLs and unresolvable names', async () => {
    expect((await refusal('not a url')).reason).toBe('invalid_url')
    expect((await refusal('https://nowhere.example/', fixed())).reason).toBe('unresolvable_host')
    expect((await refusal('https://nowhere.example/')).reason).toBe('unresolvable_host')
  })

  it('lets private addresses through with allowPrivate, but still only http and https', async () => {
    const target = await checkTargetUrl('http://127.0.0.1:3000/', { allowPrivate: true })
    expect(target.addresses).toEqual([{ address: '127.0.0.1', family: 4 }])
    const named = await checkTargetUrl('http://receiver.internal/', {
      allowPrivate: true,
      lookup: fixed('10.0.0.5'),
    })
    expect(named.addresses).toEqual([{ address: '10.0.0.5', family: 4 }])
    await expect(checkTargetUrl('ftp://127.0.0.1/', { allowPrivate: true })).rejects.toMatchObject({
      reason: 'unsupported_protocol',
    })
  })
})

describe('pinnedDispatcher', () => {
  let server: Server
  let port: number
  const hosts: (string | undefined)[] = []

  beforeAll(async () => {
    server = createServer((req, res) => {
      hosts.push(req.headers.host)
      res.end('pinned')
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    port = (server.address() as AddressInfo).port
  })

  afterAll(async () => {
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it('connects to the checked address whatever the name would resolve to', async () => {
    const addresses: ResolvedAddress[] = [{ address: '127.0.0.1', family: 4 }]
    const dispatcher = pinnedDispatcher(addresses)
    try {
      // .invalid never resolves (RFC 6761), so reaching the server proves DNS was bypassed.
      const res = await request(`http://receiver.invalid:${port}/`, { dispatcher })
      expect(res.statusCode).toBe(200)
      expect(await res.body.text()).toBe('pinned')
      expect(hosts).toContain(`receiver.invalid:${port}`)
    } finally {
      await dispatcher.close()
    }
  })

  it('fails to connect rather than fall back to DNS when no address fits', async () => {
    const dispatcher = pinnedDispatcher([])
    try {
      await expect(request(`http://receiver.invalid:${port}/`, { dispatcher })).rejects.toThrow(
        /no checked address/,
      )
    } finally {
      await dispatcher.close()
    }
  })
})
