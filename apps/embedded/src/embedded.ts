import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { MemoryBus } from '@pm/bus'
import { buildApp as buildGateway, loadGatewayConfig } from '@pm/gateway'
import { buildApp as buildIdentity, loadIdentityConfig } from '@pm/identity'
import {
  inProcess,
  loadOperatingSettings,
  type MetricsServer,
  metricsFor,
  type Service,
  serveMetrics,
  tracingFor,
} from '@pm/kit'
import { buildApp as buildPrompts, loadPromptsConfig } from '@pm/prompts'
import { buildApp as buildRender, loadRenderConfig } from '@pm/render'
import { buildApp as buildRuns, loadRunsConfig } from '@pm/runs'
import { buildApp as buildWebhooks, loadWebhooksConfig } from '@pm/webhooks'
import { buildApp as buildExperiments, loadExperimentsConfig } from '@pm/experiments'

export interface Embedded {
  /** Base URL of the gateway. */
  url: string
  /** Port of GET /metrics (METRICS_PORT), when metrics are on. */
  metricsPort?: number
  close(): Promise<void>
}

type Env = Record<string, string | undefined>

async function listenLoopback(app: Service): Promise<string> {
  await app.listen({ host: '127.0.0.1', port: 0 })
  const { port } = app.server.address() as AddressInfo
  return `http://127.0.0.1:${port}`
}

/**
 * Starts the whole service in this process. The four services listen on ephemeral
 * loopback ports and the gateway on PORT, so requests take the same path as in the
 * distributed mode; events go through one in-process bus unless NATS_URL is set.
 * Development mode (plain HTTP allowed) is the default here.
 */
export async function startEmbedded(env: Env): Promise<Embedded> {
  const base: Env = {
    NODE_ENV: 'development',
    DATA_DIR: './data',
    ...env,
    INTERNAL_AUTH_SECRET: env.INTERNAL_AUTH_SECRET ?? randomBytes(32).toString('hex'),
  }
  const bus = base.NATS_URL ? undefined : new MemoryBus()
  // One registry for the five services, served once on METRICS_PORT.
  const metricsSettings = loadOperatingSettings(base)
  const metrics = metricsFor(metricsSettings)
  // One tracer for the five services (service.name prompt-service; spans carry pm.service).
  const tracing = await tracingFor(metricsSettings, 'prompt-service')
  const internal = { ...base, HOST: '127.0.0.1', PORT: undefined }
  const started: Service[] = []
  let metricsServer: MetricsServer | undefined
  try {
    const identity = await buildIdentity({ config: loadIdentityConfig(internal), bus, metrics, tracing })
    started.push(identity)
    const identityUrl = await listenLoopback(identity)
    const prompts = await buildPrompts({
      config: loadPromptsConfig({ ...internal, IDENTITY_URL: identityUrl }),
      bus,
      metrics,
      tracing,
    })
    started.push(prompts)
    const promptsUrl = await listenLoopback(prompts)
    const render = await buildRender({
      config: loadRenderConfig({ ...internal, PROMPTS_URL: promptsUrl }),
      bus,
      metrics,
      tracing,
    })
    started.push(render)
    const renderUrl = await listenLoopback(render)
    const webhooks = await buildWebhooks({ config: loadWebhooksConfig(internal), bus, metrics, tracing })
    started.push(webhooks)
    const webhooksUrl = await listenLoopback(webhooks)
    // Runs renders through render's own routes, here in process (no HTTP exchange: a run's
    // added latency, DESIGN section 13); its keys are sealed with DATA_DIR/secret.key. The bus
    // carries its audit entries (connection changes) to prompts.
    const runs = await buildRuns({
      config: loadRunsConfig({ ...internal, RENDER_URL: renderUrl, PROMPTS_URL: promptsUrl }),
      bus,
      metrics,
      tracing,
      inProcess: { render: inProcess(render), prompts: inProcess(prompts) },
    })
    started.push(runs)
    const runsUrl = await listenLoopback(runs)
    // Datasets and experiments: each unit is a run on the runs service (RUNS_URL overrides, for tests).
    const experiments = await buildExperiments({
      config: loadExperimentsConfig({ RUNS_URL: runsUrl, ...internal, PROMPTS_URL: promptsUrl }),
      bus,
      metrics,
      tracing,
    })
    started.push(experiments)
    const experimentsUrl = await listenLoopback(experiments)

    const gatewayConfig = loadGatewayConfig({
      ...base,
      IDENTITY_URL: identityUrl,
      PROMPTS_URL: promptsUrl,
      RENDER_URLS: renderUrl,
      WEBHOOKS_URL: webhooksUrl,
      RUNS_URL: runsUrl,
      EXPERIMENTS_URL: experimentsUrl,
    })
    const gateway = await buildGateway({ config: gatewayConfig, bus, metrics, tracing })
    started.unshift(gateway)
    await gateway.listen({ host: gatewayConfig.HOST, port: gatewayConfig.PORT })
    const { port } = gateway.server.address() as AddressInfo
    if (metrics && metricsSettings.METRICS_PORT !== undefined)
      metricsServer = await serveMetrics(metrics, gatewayConfig.HOST, metricsSettings.METRICS_PORT)
    return {
      url: `http://127.0.0.1:${port}`,
      ...(metricsServer ? { metricsPort: metricsServer.port } : {}),
      close: async () => {
        await metricsServer?.close()
        // The gateway stops taking work first; the services drain; the bus goes last.
        for (const app of started) await app.close()
        await bus?.close()
        await tracing?.shutdown().catch(() => {})
      },
    }
  } catch (err) {
    await metricsServer?.close()
    for (const app of started) await app.close().catch(() => {})
    await bus?.close()
    await tracing?.shutdown().catch(() => {})
    throw err
  }
}
