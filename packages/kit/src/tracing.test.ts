import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)
const KIT = fileURLToPath(new URL('./index.ts', import.meta.url))

/**
 * In a fresh Node process, records every module resolved while the kit is imported, a
 * service is built and a request served, with and without OTEL_EXPORTER_OTLP_ENDPOINT.
 */
async function modulesLoaded(endpoint: string | undefined): Promise<{ otel: boolean; enabled: boolean }> {
  const script = `
    import { registerHooks } from 'node:module'
    const seen = []
    registerHooks({ resolve(specifier, context, next) { seen.push(specifier); return next(specifier, context) } })
    const kit = await import(${JSON.stringify(KIT)})
    const tracing = await kit.tracingFor({ OTEL_EXPORTER_OTLP_ENDPOINT: ${JSON.stringify(endpoint)} }, 'test')
    const app = kit.createService({ name: 't', internalSecret: 'x'.repeat(32), logLevel: 'silent', requireContext: false, ...(tracing ? { tracing } : {}) })
    app.get('/x', async () => ({ ok: true }))
    await app.inject({ method: 'GET', url: '/x' })
    await app.close()
    // The SDK's packages; the API package alone is prom-client's own dependency (loaded either way).
    const sdk = seen.some((s) => s.includes('@opentelemetry/') && !s.startsWith('@opentelemetry/api'))
    console.log(JSON.stringify({ otel: sdk, enabled: Boolean(tracing) }))
    process.exit(0)
  `
  const { stdout } = await run(
    process.execPath,
    ['--conditions=source', '--input-type=module', '-e', script],
    {
      timeout: 60_000,
    },
  )
  return JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as { otel: boolean; enabled: boolean }
}

describe('tracing is loaded only when an OTLP endpoint is set', () => {
  it('without OTEL_EXPORTER_OTLP_ENDPOINT: no OpenTelemetry SDK module is loaded', async () => {
    expect(await modulesLoaded(undefined)).toEqual({ otel: false, enabled: false })
  }, 60_000)

  it('with it: the SDK is loaded (dynamic import)', async () => {
    expect(await modulesLoaded('http://127.0.0.1:9')).toEqual({ otel: true, enabled: true })
  }, 60_000)
})
