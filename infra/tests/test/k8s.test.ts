import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import {
  type Cluster,
  checkApps,
  checkAutoscaling,
  checkCalls,
  checkCluster,
  checkDisruptionBudgets,
  checkIngress,
  checkMetrics,
  checkNamespace,
  checkNetworkPolicies,
  checkSchemas,
  checkSelectors,
  checkSharedSettings,
  loadCluster,
  toCluster,
} from '../src/k8s.ts'
import { APP_NAMES } from '../src/apps.ts'
import { applyJsonPatch, type JsonPatchOp, type K8sObject } from '../src/kustomize.ts'

const K8S = fileURLToPath(new URL('../../k8s', import.meta.url))

describe.each([
  ['base', false],
  ['overlays/production', true],
  ['overlays/staging', true],
])('kustomize build %s', (kustomization, overlay) => {
  const cluster = loadCluster(K8S, kustomization)

  it('holds, per service, a Deployment, Service, ConfigMap, ServiceAccount, PDB and NetworkPolicy', () => {
    for (const app of ['gateway', 'identity', 'prompts', 'render', 'webhooks', 'runs', 'experiments']) {
      for (const kind of [
        'Deployment',
        'Service',
        'ServiceAccount',
        'PodDisruptionBudget',
        'NetworkPolicy',
      ]) {
        expect(
          cluster.objects.some((o) => o.kind === kind && o.metadata.name === app),
          `${kind} ${app}`,
        ).toBe(true)
      }
      expect(cluster.configMaps.some((m) => m.metadata?.name === `${app}-config`)).toBe(true)
      expect(cluster.secretTemplates.some((s) => s.metadata?.name === `${app}-secrets`)).toBe(true)
    }
    expect(cluster.hpas.map((h) => h.spec?.scaleTargetRef.name).sort()).toEqual(['gateway', 'render'])
    expect(cluster.ingresses).toHaveLength(1)
  })

  it('passes every check: API schemas, selectors, ports, settings, probes, autoscaling, policies', () => {
    expect(checkCluster(cluster, { overlay })).toEqual([])
  })
})

describe('the overlays', () => {
  it('production: one namespace, images from the registry, more render replicas', () => {
    const c = loadCluster(K8S, 'overlays/production')
    expect(new Set(c.objects.map((o) => o.metadata.namespace))).toEqual(
      new Set(['prompt-service', undefined]),
    )
    const render = c.deployments.find((d) => d.metadata?.name === 'render')
    expect(render?.spec?.template.spec?.containers[0]?.image).toBe(
      'registry.example.com/prompt-service/render:0.1.0',
    )
    const hpa = c.hpas.find((h) => h.metadata?.name === 'render')
    expect([hpa?.spec?.minReplicas, hpa?.spec?.maxReplicas]).toEqual([3, 40])
  })

  it('both: every app image from the registry (none left on the local name of the base)', () => {
    for (const overlay of ['overlays/production', 'overlays/staging']) {
      const c = loadCluster(K8S, overlay)
      for (const app of APP_NAMES) {
        const deployment = c.deployments.find((d) => d.metadata?.name === app)
        expect(deployment?.spec?.template.spec?.containers[0]?.image, `${overlay} ${app}`).toMatch(
          new RegExp(`^registry\\.example\\.com/prompt-service/${app}:`),
        )
      }
    }
  })

  it('staging: one replica of the stateful services, debug logs, its own host', () => {
    const c = loadCluster(K8S, 'overlays/staging')
    for (const name of ['identity', 'prompts', 'webhooks', 'runs', 'experiments']) {
      expect(c.deployments.find((d) => d.metadata?.name === name)?.spec?.replicas).toBe(1)
    }
    expect(c.hpas.every((h) => h.spec?.minReplicas === 1)).toBe(true)
    expect(c.configMaps.every((m) => m.data?.LOG_LEVEL === 'debug')).toBe(true)
    expect(c.ingresses[0]?.spec?.rules?.[0]?.host).toBe('staging.prompts.example.com')
  })
})

/** The production build with some JSON patches applied, to show each check catches its fault. */
function broken(...changes: Array<[kind: string, name: string, ops: JsonPatchOp[]]>): Cluster {
  const c = loadCluster(K8S, 'overlays/production')
  let objects = structuredClone(c.objects)
  let templates = structuredClone(c.secretTemplates) as unknown as K8sObject[]
  for (const [kind, name, ops] of changes) {
    const inTemplates = kind === 'Secret'
    const list = inTemplates ? templates : objects
    const index = list.findIndex((o) => o.kind === kind && o.metadata.name === name)
    if (index < 0) throw new Error(`${kind}/${name} not found`)
    const patched = ops.length === 0 ? undefined : (applyJsonPatch(list[index], ops) as K8sObject)
    const next = patched
      ? list.map((o, i) => (i === index ? patched : o))
      : list.filter((_, i) => i !== index)
    if (inTemplates) templates = next
    else objects = next
  }
  return toCluster(c.where, objects, templates)
}

const CONTAINER = '/spec/template/spec/containers/0'

describe('the checks catch', () => {
  it('a field of the wrong type (API schema)', () => {
    const c = broken(['Deployment', 'identity', [{ op: 'replace', path: '/spec/replicas', value: 'two' }]])
    expect(checkSchemas(c).join('\n')).toMatch(/Deployment\/identity.*replicas must be integer/)
  })

  it('a kind the project does not use, and a Secret inside the build', () => {
    const base = loadCluster(K8S, 'overlays/production')
    const c = toCluster(
      base.where,
      [
        ...base.objects,
        { apiVersion: 'extensions/v1beta1', kind: 'Ingress', metadata: { name: 'old' } },
        structuredClone(base.secretTemplates[0]) as unknown as K8sObject,
      ],
      base.secretTemplates as unknown as K8sObject[],
    )
    const problems = checkSchemas(c).join('\n')
    expect(problems).toMatch(/extensions\/v1beta1 kind Ingress is not one this project uses/)
    expect(problems).toMatch(/Secrets are created out of band/)
  })

  it('a Service whose selector matches no Deployment', () => {
    const c = broken([
      'Service',
      'prompts',
      [{ op: 'replace', path: '/spec/selector/app.kubernetes.io~1name', value: 'prompt' }],
    ])
    expect(checkSelectors(c)).toEqual([expect.stringMatching(/Service prompts selects 0 Deployments/)])
  })

  it('a container port that is not the port the app listens on', () => {
    const c = broken([
      'Deployment',
      'identity',
      [{ op: 'replace', path: `${CONTAINER}/ports/0/containerPort`, value: 4011 }],
    ])
    expect(checkApps(c).join('\n')).toMatch(/identity: container ports 4011 but the app listens on 4001/)
    expect(checkCalls(c).join('\n')).toMatch(
      /gateway IDENTITY_URL: .* reaches port 4011 of identity, which listens on 4001/,
    )
  })

  it('a PORT setting that moves the app away from its container port', () => {
    const c = broken(['ConfigMap', 'render-config', [{ op: 'replace', path: '/data/PORT', value: '5000' }]])
    expect(checkApps(c).join('\n')).toMatch(/render: container ports 4003 but the app listens on 5000/)
  })

  it('a required setting missing, and a distributed-mode one', () => {
    const c = broken(
      ['Secret', 'render-secrets', [{ op: 'remove', path: '/stringData/INTERNAL_AUTH_SECRET' }]],
      ['ConfigMap', 'prompts-config', [{ op: 'remove', path: '/data/NATS_URL' }]],
    )
    const problems = checkApps(c).join('\n')
    expect(problems).toMatch(/render would not start: .*INTERNAL_AUTH_SECRET: is required/)
    expect(problems).toMatch(/prompts needs NATS_URL, not provided/)
  })

  it('a misspelt setting, and a value the app refuses', () => {
    const c = broken(
      ['ConfigMap', 'render-config', [{ op: 'add', path: '/data/PROMPT_URL', value: 'http://prompts:4002' }]],
      [
        'ConfigMap',
        'gateway-config',
        [{ op: 'replace', path: '/data/REDIS_URL', value: 'redis-master:6379' }],
      ],
    )
    const problems = checkApps(c).join('\n')
    expect(problems).toMatch(/PROMPT_URL is not a setting of render/)
    expect(problems).toMatch(/gateway would not start: .*REDIS_URL: must match pattern/)
  })

  it('a URL that reaches no Service, or the wrong one', () => {
    const c = broken(
      [
        'ConfigMap',
        'gateway-config',
        [{ op: 'replace', path: '/data/RENDER_URLS', value: 'http://render:4003,http://renderer:4003' }],
      ],
      [
        'ConfigMap',
        'render-config',
        [{ op: 'replace', path: '/data/PROMPTS_URL', value: 'http://identity:4001' }],
      ],
    )
    const problems = checkCalls(c).join('\n')
    expect(problems).toMatch(/gateway RENDER_URLS: http:\/\/renderer:4003 names no Service/)
    expect(problems).toMatch(/render PROMPTS_URL: Service identity does not select prompts's pods/)
  })

  it('probes off the health routes', () => {
    const c = broken([
      'Deployment',
      'webhooks',
      [
        { op: 'replace', path: `${CONTAINER}/readinessProbe/httpGet/path`, value: '/health/live' },
        { op: 'remove', path: `${CONTAINER}/livenessProbe` },
      ],
    ])
    const problems = checkApps(c).join('\n')
    expect(problems).toMatch(/webhooks: readiness probe asks \/health\/live, expected \/health\/ready/)
    expect(problems).toMatch(/webhooks: has no liveness probe/)
  })

  it('a container without limits, or running as root', () => {
    const c = broken([
      'Deployment',
      'prompts',
      [
        { op: 'remove', path: `${CONTAINER}/resources/limits` },
        { op: 'replace', path: '/spec/template/spec/securityContext/runAsNonRoot', value: false },
      ],
    ])
    const problems = checkApps(c).join('\n')
    expect(problems).toMatch(/prompts: cpu request and limit must both be set/)
    expect(problems).toMatch(/prompts: pod must set runAsNonRoot/)
  })

  it('an HPA aimed elsewhere, and a Deployment that fixes its replicas under an HPA', () => {
    const c = broken(
      [
        'HorizontalPodAutoscaler',
        'render',
        [{ op: 'replace', path: '/spec/scaleTargetRef/name', value: 'prompts' }],
      ],
      ['Deployment', 'gateway', [{ op: 'add', path: '/spec/replicas', value: 2 }]],
    )
    const problems = checkAutoscaling(c).join('\n')
    expect(problems).toMatch(/no HorizontalPodAutoscaler targets the render Deployment/)
    expect(problems).toMatch(/Deployment prompts sets replicas, which would fight the autoscaler/)
    expect(problems).toMatch(/Deployment gateway sets replicas/)
  })

  it('a service left without a disruption budget', () => {
    const c = broken(['PodDisruptionBudget', 'webhooks', []])
    expect(checkDisruptionBudgets(c)).toEqual([
      expect.stringMatching(/webhooks is covered by 0 PodDisruptionBudgets/),
    ])
  })

  it('an Ingress without TLS or aimed at a service other than the gateway', () => {
    const c = broken([
      'Ingress',
      'prompt-service',
      [
        { op: 'remove', path: '/spec/tls' },
        { op: 'replace', path: '/spec/rules/0/http/paths/0/backend/service/name', value: 'render' },
      ],
    ])
    const problems = checkIngress(c).join('\n')
    expect(problems).toMatch(/no TLS/)
    expect(problems).toMatch(/backend render is not the gateway/)
  })

  it('a NetworkPolicy that lets anyone in, or keeps out the right caller', () => {
    const c = broken(
      ['NetworkPolicy', 'identity', [{ op: 'remove', path: '/spec/ingress/0/from' }]],
      ['NetworkPolicy', 'prompts', [{ op: 'remove', path: '/spec/ingress/0/from/1' }]],
    )
    // render -> identity stays blocked: render's own egress policy does not allow it.
    expect(checkNetworkPolicies(c)).toEqual([
      expect.stringMatching(/the ingress controller -> identity:4001 is allowed, expected blocked/),
      expect.stringMatching(/a pod of another namespace -> identity:4001 is allowed, expected blocked/),
      expect.stringMatching(/an outside address -> identity:4001 is allowed, expected blocked/),
      expect.stringMatching(/render -> prompts:4002 is blocked, expected allowed/),
      expect.stringMatching(/Prometheus -> identity API port is allowed, expected blocked/),
    ])
  })

  it('a metrics port that is not announced, not set, published by a Service or open to anyone', () => {
    const c = broken(
      [
        'Deployment',
        'render',
        [{ op: 'remove', path: '/spec/template/metadata/annotations/prometheus.io~1scrape' }],
      ],
      ['ConfigMap', 'prompts-config', [{ op: 'remove', path: '/data/METRICS_PORT' }]],
      [
        'Service',
        'gateway',
        [{ op: 'add', path: '/spec/ports/-', value: { name: 'metrics', port: 9464, targetPort: 'metrics' } }],
      ],
      ['NetworkPolicy', 'webhooks', [{ op: 'remove', path: '/spec/ingress/1/from' }]],
    )
    const problems = checkMetrics(c).join('\n')
    expect(problems).toMatch(/render: pod lacks the prometheus.io\/scrape annotation/)
    expect(problems).toMatch(/prompts: METRICS_PORT is not set/)
    expect(problems).toMatch(/gateway: Service gateway publishes the metrics port/)
    expect(checkNetworkPolicies(c).join('\n')).toMatch(
      /the ingress controller -> webhooks metrics port 9464 is allowed, expected blocked/,
    )
  })

  it('a metrics port the same as the API port, or kept from Prometheus', () => {
    const c = broken(
      ['ConfigMap', 'identity-config', [{ op: 'replace', path: '/data/METRICS_PORT', value: '4001' }]],
      ['NetworkPolicy', 'render', [{ op: 'remove', path: '/spec/ingress/1' }]],
    )
    expect(checkMetrics(c).join('\n')).toMatch(/identity: METRICS_PORT is the API port/)
    expect(checkNetworkPolicies(c).join('\n')).toMatch(
      /Prometheus -> render metrics port 9464 is blocked, expected allowed/,
    )
  })

  it('a caller allowed in by the target and out by itself', () => {
    const c = broken(
      [
        'NetworkPolicy',
        'identity',
        [
          {
            op: 'add',
            path: '/spec/ingress/0/from/-',
            value: { podSelector: { matchLabels: { 'app.kubernetes.io/name': 'render' } } },
          },
        ],
      ],
      [
        'NetworkPolicy',
        'render',
        [{ op: 'add', path: '/spec/egress/-', value: { ports: [{ protocol: 'TCP', port: 4001 }] } }],
      ],
    )
    expect(checkNetworkPolicies(c)).toEqual([
      expect.stringMatching(/render -> identity:4001 is allowed, expected blocked/),
    ])
  })

  it('no default deny: everything open', () => {
    const c = broken(
      ...[
        'default-deny',
        'common-egress',
        'nats-egress',
        'gateway',
        'identity',
        'prompts',
        'render',
        'webhooks',
        'runs',
        'experiments',
      ].map((name): [string, string, JsonPatchOp[]] => ['NetworkPolicy', name, []]),
    )
    const problems = checkNetworkPolicies(c).join('\n')
    expect(problems).toMatch(/a pod of another namespace -> identity:4001 is allowed, expected blocked/)
    expect(problems).toMatch(/render -> the internet on 443 is allowed, expected blocked/)
    expect(problems).toMatch(/gateway -> mongo \(MONGO_URL\) is allowed, expected blocked/)
  })

  it('webhooks able to reach private addresses', () => {
    const c = broken([
      'NetworkPolicy',
      'webhooks',
      [{ op: 'replace', path: '/spec/egress/1/to/0/ipBlock/except', value: [] }],
    ])
    expect(checkNetworkPolicies(c).join('\n')).toMatch(/webhooks -> a private address on 443 is allowed/)
  })

  it('runs open to any port or to private addresses, or kept from NATS (its audit entries)', () => {
    const c = broken(
      ['NetworkPolicy', 'runs', [{ op: 'remove', path: '/spec/egress/3/ports' }]],
      [
        'NetworkPolicy',
        'nats-egress',
        [
          {
            op: 'replace',
            path: '/spec/podSelector/matchExpressions/0/values',
            value: ['gateway', 'identity', 'prompts', 'render', 'webhooks', 'experiments'],
          },
        ],
      ],
    )
    const problems = checkNetworkPolicies(c).join('\n')
    expect(problems).toMatch(/runs -> the internet on 8443 is allowed, expected blocked/)
    expect(problems).toMatch(/runs -> nats \(NATS_URL\) is blocked, expected allowed/)
    const open = broken([
      'NetworkPolicy',
      'runs',
      [{ op: 'replace', path: '/spec/egress/3/to/0/ipBlock/except', value: [] }],
    ])
    expect(checkNetworkPolicies(open).join('\n')).toMatch(/runs -> a private address on 443 is allowed/)
  })

  it('experiments kept from runs, render kept from runs, the gateway kept from experiments', () => {
    const c = broken(
      ['NetworkPolicy', 'runs', [{ op: 'remove', path: '/spec/ingress/0/from/1' }]],
      ['NetworkPolicy', 'render', [{ op: 'remove', path: '/spec/ingress/0/from/1' }]],
      ['NetworkPolicy', 'gateway', [{ op: 'remove', path: '/spec/egress/5' }]],
    )
    expect(checkNetworkPolicies(c)).toEqual([
      expect.stringMatching(/runs -> render:4003 is blocked, expected allowed/),
      expect.stringMatching(/experiments -> runs:4005 is blocked, expected allowed/),
      expect.stringMatching(/gateway -> experiments:4006 is blocked, expected allowed/),
    ])
  })

  it('the gateway without RUNS_URL, and runs given a REDIS_URL it does not read', () => {
    const c = broken(
      ['ConfigMap', 'gateway-config', [{ op: 'remove', path: '/data/RUNS_URL' }]],
      ['ConfigMap', 'runs-config', [{ op: 'add', path: '/data/REDIS_URL', value: 'redis://redis:6379' }]],
      ['Secret', 'runs-secrets', [{ op: 'remove', path: '/stringData/SECRETS_KEY' }]],
    )
    const problems = checkApps(c).join('\n')
    expect(problems).toMatch(/gateway needs RUNS_URL, not provided/)
    expect(problems).toMatch(/REDIS_URL is not a setting of runs/)
    expect(problems).toMatch(/runs needs SECRETS_KEY, not provided/)
  })

  it('gateway and identity disagreeing on the token issuer', () => {
    const c = broken([
      'ConfigMap',
      'identity-config',
      [{ op: 'replace', path: '/data/JWT_ISSUER', value: 'someone' }],
    ])
    expect(checkSharedSettings(c)).toEqual([expect.stringMatching(/JWT_ISSUER differs/)])
  })

  it('apps on different NATS servers, or sharing a database', () => {
    const c = broken(
      ['ConfigMap', 'render-config', [{ op: 'replace', path: '/data/NATS_URL', value: 'nats://other:4222' }]],
      ['ConfigMap', 'webhooks-config', [{ op: 'replace', path: '/data/MONGO_DB', value: 'pm_prompts' }]],
    )
    const problems = checkSharedSettings(c).join('\n')
    expect(problems).toMatch(/the apps are not on one NATS/)
    expect(problems).toMatch(/services share a MongoDB database/)
  })

  it('a namespace that does not enforce the restricted profile', () => {
    const c = broken([
      'Namespace',
      'prompt-service',
      [{ op: 'remove', path: '/metadata/labels/pod-security.kubernetes.io~1enforce' }],
    ])
    expect(checkNamespace(c)).toEqual([expect.stringMatching(/does not enforce the restricted/)])
  })
})
