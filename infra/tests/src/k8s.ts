import { readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment'
import {
  HorizontalPodAutoscaler,
  type IHorizontalPodAutoscaler,
} from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler'
import { type IIngress, Ingress } from 'kubernetes-models/networking.k8s.io/v1/Ingress'
import { type INetworkPolicy, NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import {
  type IPodDisruptionBudget,
  PodDisruptionBudget,
} from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import { ConfigMap, type IConfigMap } from 'kubernetes-models/v1/ConfigMap'
import type { IContainer } from 'kubernetes-models/v1/Container'
import { type INamespace, Namespace } from 'kubernetes-models/v1/Namespace'
import { type ISecret, Secret } from 'kubernetes-models/v1/Secret'
import { type IService, Service } from 'kubernetes-models/v1/Service'
import { type IServiceAccount, ServiceAccount } from 'kubernetes-models/v1/ServiceAccount'
import {
  APP_NAMES,
  APPS,
  type AppName,
  callersOf,
  checkSettings,
  SERVER_SETTING,
  type ServerName,
} from './apps.ts'
import { type K8sObject, kustomizeBuild, parseImage, readManifestFile } from './kustomize.ts'
import { allowed, type Endpoint, selects } from './netpol.ts'

type PodSpec = NonNullable<NonNullable<IDeployment['spec']>['template']['spec']>
type Probe = NonNullable<IContainer['livenessProbe']>

interface Validatable {
  validate(): void
}

/**
 * Each kind the manifests may use, checked against the Kubernetes API schemas that the
 * kubernetes-models package carries (generated from the Kubernetes OpenAPI document).
 */
const MODELS: Record<string, (doc: K8sObject) => Validatable> = {
  'v1/ConfigMap': (d) => new ConfigMap(d as unknown as IConfigMap),
  'v1/Namespace': (d) => new Namespace(d as unknown as INamespace),
  'v1/Secret': (d) => new Secret(d as unknown as ISecret),
  'v1/Service': (d) => new Service(d as unknown as IService),
  'v1/ServiceAccount': (d) => new ServiceAccount(d as unknown as IServiceAccount),
  'apps/v1/Deployment': (d) => new Deployment(d as unknown as IDeployment),
  'autoscaling/v2/HorizontalPodAutoscaler': (d) =>
    new HorizontalPodAutoscaler(d as unknown as IHorizontalPodAutoscaler),
  'policy/v1/PodDisruptionBudget': (d) => new PodDisruptionBudget(d as unknown as IPodDisruptionBudget),
  'networking.k8s.io/v1/NetworkPolicy': (d) => new NetworkPolicy(d as unknown as INetworkPolicy),
  'networking.k8s.io/v1/Ingress': (d) => new Ingress(d as unknown as IIngress),
}

/** Validates one object against its API schema; returns the problems found. */
export function validateObject(object: K8sObject, where: string): string[] {
  const model = MODELS[`${object.apiVersion}/${object.kind}`]
  const id = `${where}: ${object.kind}/${object.metadata.name}`
  if (!model)
    return [`${id}: apiVersion ${object.apiVersion} kind ${object.kind} is not one this project uses`]
  try {
    model(object).validate()
    return []
  } catch (err) {
    return [`${id}: ${(err as Error).message}`]
  }
}

/** A kustomize build, sorted by kind, plus the Secret templates kept outside it. */
export interface Cluster {
  where: string
  objects: K8sObject[]
  deployments: IDeployment[]
  services: IService[]
  configMaps: IConfigMap[]
  secrets: ISecret[]
  hpas: IHorizontalPodAutoscaler[]
  pdbs: IPodDisruptionBudget[]
  networkPolicies: INetworkPolicy[]
  ingresses: IIngress[]
  namespaces: INamespace[]
  serviceAccounts: IServiceAccount[]
  secretTemplates: ISecret[]
}

function ofKind<T>(objects: K8sObject[], kind: string): T[] {
  return objects.filter((o) => o.kind === kind) as unknown as T[]
}

export function toCluster(where: string, objects: K8sObject[], templates: K8sObject[]): Cluster {
  return {
    where,
    objects,
    deployments: ofKind(objects, 'Deployment'),
    services: ofKind(objects, 'Service'),
    configMaps: ofKind(objects, 'ConfigMap'),
    secrets: ofKind(objects, 'Secret'),
    hpas: ofKind(objects, 'HorizontalPodAutoscaler'),
    pdbs: ofKind(objects, 'PodDisruptionBudget'),
    networkPolicies: ofKind(objects, 'NetworkPolicy'),
    ingresses: ofKind(objects, 'Ingress'),
    namespaces: ofKind(objects, 'Namespace'),
    serviceAccounts: ofKind(objects, 'ServiceAccount'),
    secretTemplates: ofKind(templates, 'Secret'),
  }
}

/** Every `*.template.yaml` under a directory: the Secrets users create themselves. */
export function readSecretTemplates(dir: string): K8sObject[] {
  const out: K8sObject[] = []
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry)
    if (statSync(path).isDirectory()) out.push(...readSecretTemplates(path))
    else if (entry.endsWith('.template.yaml')) out.push(...readManifestFile(path))
  }
  return out
}

export function loadCluster(k8sRoot: string, kustomization: string): Cluster {
  return toCluster(
    kustomization,
    kustomizeBuild(join(k8sRoot, kustomization)),
    readSecretTemplates(join(k8sRoot, 'base')),
  )
}

/**
 * Values standing in for the Secret templates' keys when the settings are loaded: a key in a
 * template counts as provided, and these values let the app's own config loader check the
 * rest. A template key without a sample here fails the check, so that a new secret gets a
 * thought.
 */
export const SECRET_SAMPLES: Record<string, string> = {
  INTERNAL_AUTH_SECRET: 'a-sample-secret-of-at-least-thirty-two-characters',
  MONGO_URL: 'mongodb://user:password@mongodb-svc.mongodb.svc.cluster.local:27017/?replicaSet=mongodb',
  BOOTSTRAP_ADMIN_PASSWORD: 'sample-password',
  SECRETS_KEY: Buffer.alloc(32, 7).toString('base64'),
}

const PART_OF = 'app.kubernetes.io/part-of'
const NAME = 'app.kubernetes.io/name'

function namespaceOf(object: { metadata?: { namespace?: string } }): string {
  return object.metadata?.namespace ?? 'default'
}

function podLabels(deployment: IDeployment): Record<string, string> {
  return deployment.spec?.template.metadata?.labels ?? {}
}

function podSpec(deployment: IDeployment): PodSpec | undefined {
  return deployment.spec?.template.spec
}

/** The one Deployment of an app (by its app.kubernetes.io/name label) and its container. */
export function appWorkload(
  c: Cluster,
  app: AppName,
): { deployment: IDeployment; container: IContainer } | { problem: string } {
  const found = c.deployments.filter((d) => d.metadata?.labels?.[NAME] === app)
  if (found.length !== 1) return { problem: `${c.where}: ${found.length} Deployments of ${app}, expected 1` }
  const [deployment] = found as [IDeployment]
  const container = podSpec(deployment)?.containers.find((k) => k.name === app)
  if (!container)
    return { problem: `${c.where}: Deployment ${deployment.metadata?.name} has no container ${app}` }
  return { deployment, container }
}

/**
 * The environment a container gets: envFrom sources in order (ConfigMaps from the build,
 * Secrets from the templates with sample values), then env entries, which win.
 */
export function containerEnv(
  c: Cluster,
  namespace: string,
  container: IContainer,
): { env: Record<string, string>; problems: string[] } {
  const env: Record<string, string> = {}
  const problems: string[] = []
  const where = `${c.where}: container ${container.name}`
  const configMap = (name: string) =>
    c.configMaps.find((m) => m.metadata?.name === name && namespaceOf(m) === namespace)
  const secret = (name: string) => c.secretTemplates.find((s) => s.metadata?.name === name)
  const secretValues = (s: ISecret): Record<string, string> => {
    const keys = [...Object.keys(s.stringData ?? {}), ...Object.keys(s.data ?? {})]
    const values: Record<string, string> = {}
    for (const key of keys) {
      const sample = SECRET_SAMPLES[key]
      if (sample === undefined) problems.push(`${where}: no sample value for secret key ${key}`)
      else values[key] = sample
    }
    return values
  }
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? ''
    if (source.configMapRef) {
      const map = configMap(source.configMapRef.name ?? '')
      if (!map) {
        if (!source.configMapRef.optional)
          problems.push(`${where}: ConfigMap ${source.configMapRef.name} not found`)
        continue
      }
      for (const [key, value] of Object.entries(map.data ?? {})) env[prefix + key] = value
    }
    if (source.secretRef) {
      const s = secret(source.secretRef.name ?? '')
      if (!s) {
        if (!source.secretRef.optional)
          problems.push(`${where}: no template for Secret ${source.secretRef.name}`)
        continue
      }
      for (const [key, value] of Object.entries(secretValues(s))) env[prefix + key] = value
    }
  }
  for (const entry of container.env ?? []) {
    if (entry.value !== undefined) env[entry.name] = entry.value
    else if (entry.valueFrom?.configMapKeyRef) {
      const ref = entry.valueFrom.configMapKeyRef
      const value = configMap(ref.name ?? '')?.data?.[ref.key]
      if (value !== undefined) env[entry.name] = value
      else if (!ref.optional)
        problems.push(`${where}: ${entry.name} refers to missing ${ref.name}/${ref.key}`)
    } else if (entry.valueFrom?.secretKeyRef) {
      const ref = entry.valueFrom.secretKeyRef
      const s = secret(ref.name ?? '')
      const value = s ? secretValues(s)[ref.key] : undefined
      if (value !== undefined) env[entry.name] = value
      else if (!ref.optional)
        problems.push(`${where}: ${entry.name} refers to missing Secret ${ref.name}/${ref.key}`)
    } else {
      problems.push(`${where}: ${entry.name} has a source this check does not read`)
    }
  }
  return { env, problems }
}

/** Every object passes its API schema; the kinds are the ones expected; no Secret in the build. */
export function checkSchemas(c: Cluster): string[] {
  const problems = c.objects.flatMap((o) => validateObject(o, c.where))
  problems.push(
    ...c.secretTemplates.flatMap((o) => validateObject(o as unknown as K8sObject, `${c.where} template`)),
  )
  for (const s of c.secrets) {
    problems.push(`${c.where}: Secret ${s.metadata?.name} is in the build; Secrets are created out of band`)
  }
  return problems
}

/** Every Service selects the pods of exactly one Deployment; Deployment selectors match their pods. */
export function checkSelectors(c: Cluster): string[] {
  const problems: string[] = []
  for (const d of c.deployments) {
    const selector = d.spec?.selector
    if (!selector?.matchLabels || Object.keys(selector.matchLabels).length === 0) {
      problems.push(`${c.where}: Deployment ${d.metadata?.name} has no matchLabels selector`)
    } else if (!selects(selector, podLabels(d))) {
      problems.push(`${c.where}: Deployment ${d.metadata?.name} selector does not match its pod labels`)
    }
  }
  for (const s of c.services) {
    const selector = s.spec?.selector
    if (!selector || Object.keys(selector).length === 0) {
      problems.push(`${c.where}: Service ${s.metadata?.name} has no selector`)
      continue
    }
    const matched = c.deployments.filter(
      (d) => namespaceOf(d) === namespaceOf(s) && selects({ matchLabels: selector }, podLabels(d)),
    )
    if (matched.length !== 1) {
      problems.push(
        `${c.where}: Service ${s.metadata?.name} selects ${matched.length} Deployments (${matched.map((d) => d.metadata?.name).join(', ') || 'none'}), expected 1`,
      )
    }
  }
  return problems
}

function containerPort(container: IContainer, port: number | string | undefined): number | undefined {
  if (typeof port === 'number')
    return container.ports?.some((p) => p.containerPort === port) ? port : undefined
  return container.ports?.find((p) => p.name === port)?.containerPort
}

function checkProbe(
  probe: Probe | undefined,
  kind: string,
  path: string,
  container: IContainer,
  port: number | undefined,
): string | undefined {
  if (!probe) return `has no ${kind} probe`
  const get = probe.httpGet
  if (!get) return `${kind} probe is not an HTTP GET`
  if (get.path !== path) return `${kind} probe asks ${get.path}, expected ${path}`
  const target = containerPort(container, get.port)
  if (target === undefined || target !== port)
    return `${kind} probe port ${get.port} is not the port the app listens on (${port})`
  return undefined
}

/** Parses a Kubernetes quantity ("250m", "1", "512Mi", "1G") into a number. */
export function quantity(value: string | number | undefined): number | undefined {
  if (value === undefined) return undefined
  if (typeof value === 'number') return value
  const match = /^([0-9.]+)(m|k|M|G|T|Ki|Mi|Gi|Ti)?$/.exec(value)
  if (!match) return undefined
  const factor: Record<string, number> = {
    m: 1e-3,
    k: 1e3,
    M: 1e6,
    G: 1e9,
    T: 1e12,
    Ki: 2 ** 10,
    Mi: 2 ** 20,
    Gi: 2 ** 30,
    Ti: 2 ** 40,
  }
  return Number(match[1]) * (match[2] ? (factor[match[2]] ?? 1) : 1)
}

/**
 * Per app: one Deployment; its settings complete and accepted by the app's config schema;
 * the container port equal to the port the app listens on; probes on the health routes;
 * requests and limits; the restricted Pod Security Standard.
 */
export function checkApps(c: Cluster): string[] {
  const problems: string[] = []
  for (const app of APP_NAMES) {
    const workload = appWorkload(c, app)
    if ('problem' in workload) {
      problems.push(workload.problem)
      continue
    }
    const { deployment, container } = workload
    const where = `${c.where}: ${app}`
    const { env, problems: envProblems } = containerEnv(c, namespaceOf(deployment), container)
    problems.push(...envProblems)
    const settings = checkSettings(APPS[app], env, c.where)
    problems.push(...settings.problems)

    // The API port first (named http); a second one only for the metrics (METRICS_PORT).
    const ports = (container.ports ?? []).filter((p) => p.name !== 'metrics')
    if (
      ports.length !== 1 ||
      ports[0]?.containerPort !== settings.port ||
      container.ports?.[0] !== ports[0]
    ) {
      problems.push(
        `${where}: container ports ${ports.map((p) => p.containerPort).join(',')} but the app listens on ${settings.port}`,
      )
    }
    for (const [probe, kind, path] of [
      [container.livenessProbe, 'liveness', '/health/live'],
      [container.readinessProbe, 'readiness', '/health/ready'],
    ] as const) {
      const problem = checkProbe(probe, kind, path, container, settings.port)
      if (problem) problems.push(`${where}: ${problem}`)
    }
    if (container.startupProbe) {
      const problem = checkProbe(container.startupProbe, 'startup', '/health/live', container, settings.port)
      if (problem) problems.push(`${where}: ${problem}`)
    }

    for (const resource of ['cpu', 'memory']) {
      const request = quantity(container.resources?.requests?.[resource])
      const limit = quantity(container.resources?.limits?.[resource])
      if (request === undefined || limit === undefined) {
        problems.push(`${where}: ${resource} request and limit must both be set`)
      } else if (request > limit) {
        problems.push(`${where}: ${resource} request above its limit`)
      }
    }

    const pod = podSpec(deployment)
    const sc = container.securityContext
    if (pod?.securityContext?.runAsNonRoot !== true) problems.push(`${where}: pod must set runAsNonRoot`)
    if ((sc?.seccompProfile ?? pod?.securityContext?.seccompProfile)?.type !== 'RuntimeDefault') {
      problems.push(`${where}: seccompProfile must be RuntimeDefault`)
    }
    if (sc?.allowPrivilegeEscalation !== false)
      problems.push(`${where}: allowPrivilegeEscalation must be false`)
    if (!sc?.capabilities?.drop?.includes('ALL')) problems.push(`${where}: must drop ALL capabilities`)
    if (sc?.privileged) problems.push(`${where}: must not be privileged`)
    if (sc?.readOnlyRootFilesystem !== true) problems.push(`${where}: root filesystem must be read-only`)
    if (pod?.hostNetwork || pod?.hostPID || pod?.hostIPC)
      problems.push(`${where}: must not share host namespaces`)
    if (pod?.volumes?.some((v) => v.hostPath)) problems.push(`${where}: must not mount host paths`)
    if (pod?.automountServiceAccountToken !== false) {
      problems.push(`${where}: must not mount a service account token (no Kubernetes API use)`)
    }
    const account = pod?.serviceAccountName
    if (!account || !c.serviceAccounts.some((s) => s.metadata?.name === account)) {
      problems.push(`${where}: ServiceAccount ${account} is not in the build`)
    }
    const image = parseImage(container.image ?? '')
    if (!image.digest && (!image.tag || image.tag === 'latest')) {
      problems.push(`${where}: image ${container.image} must carry a version tag or digest`)
    }
    if (!image.name.endsWith(`/${app}`))
      problems.push(`${where}: image ${container.image} is not the ${app} image`)
  }
  return problems
}

/** Finds the Service a cluster-internal URL names, in the caller's namespace. */
function serviceForHost(c: Cluster, host: string, namespace: string): IService | undefined {
  const [name, ns = namespace, svc, ...rest] = host.split('.')
  if (svc !== undefined && (svc !== 'svc' || (rest.length > 0 && rest.join('.') !== 'cluster.local'))) {
    return undefined
  }
  return c.services.find((s) => s.metadata?.name === name && namespaceOf(s) === ns)
}

/**
 * Every URL an app holds for another app reaches it: the host is a Service of the build,
 * the port is one of its ports, the Service selects the target app's Deployment, and its
 * targetPort is the port the target listens on.
 */
export function checkCalls(c: Cluster): string[] {
  const problems: string[] = []
  for (const caller of APP_NAMES) {
    const workload = appWorkload(c, caller)
    if ('problem' in workload) continue
    const namespace = namespaceOf(workload.deployment)
    const { env } = containerEnv(c, namespace, workload.container)
    for (const [setting, target] of Object.entries(APPS[caller].calls)) {
      if (!target) continue
      const where = `${c.where}: ${caller} ${setting}`
      const targetWorkload = appWorkload(c, target)
      if ('problem' in targetWorkload) continue
      const targetEnv = containerEnv(c, namespaceOf(targetWorkload.deployment), targetWorkload.container).env
      const listens = checkSettings(APPS[target], targetEnv, c.where).port
      for (const raw of (env[setting] ?? '').split(',').filter(Boolean)) {
        const url = new URL(raw.trim())
        const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80))
        const service = serviceForHost(c, url.hostname, namespace)
        if (!service) {
          problems.push(`${where}: ${raw} names no Service of the build`)
          continue
        }
        const servicePort = service.spec?.ports?.find((p) => p.port === port)
        if (!servicePort) {
          problems.push(`${where}: Service ${service.metadata?.name} has no port ${port}`)
          continue
        }
        if (!selects({ matchLabels: service.spec?.selector ?? {} }, podLabels(targetWorkload.deployment))) {
          problems.push(`${where}: Service ${service.metadata?.name} does not select ${target}'s pods`)
          continue
        }
        const resolved = containerPort(targetWorkload.container, servicePort.targetPort ?? servicePort.port)
        if (resolved === undefined || resolved !== listens) {
          problems.push(`${where}: ${raw} reaches port ${resolved} of ${target}, which listens on ${listens}`)
        }
      }
    }
  }
  return problems
}

/** render and the gateway scale with an HPA on CPU; the target exists and asks for CPU. */
export function checkAutoscaling(c: Cluster, autoscaled: AppName[] = ['render', 'gateway']): string[] {
  const problems: string[] = []
  for (const hpa of c.hpas) {
    const ref = hpa.spec?.scaleTargetRef
    const where = `${c.where}: HPA ${hpa.metadata?.name}`
    const target = c.deployments.find(
      (d) => ref?.kind === 'Deployment' && ref.apiVersion === 'apps/v1' && d.metadata?.name === ref.name,
    )
    if (!target) {
      problems.push(
        `${where}: targets ${ref?.apiVersion}/${ref?.kind}/${ref?.name}, not a Deployment of the build`,
      )
      continue
    }
    if ((hpa.spec?.minReplicas ?? 1) > (hpa.spec?.maxReplicas ?? 0)) problems.push(`${where}: min above max`)
    const usesCpu = hpa.spec?.metrics?.some((m) => m.type === 'Resource' && m.resource?.name === 'cpu')
    if (!usesCpu) problems.push(`${where}: no CPU metric`)
    for (const container of podSpec(target)?.containers ?? []) {
      if (!container.resources?.requests?.cpu) problems.push(`${where}: ${container.name} has no CPU request`)
    }
    if (target.spec?.replicas !== undefined) {
      problems.push(`${where}: Deployment ${ref?.name} sets replicas, which would fight the autoscaler`)
    }
  }
  for (const app of autoscaled) {
    const workload = appWorkload(c, app)
    if ('problem' in workload) continue
    const name = workload.deployment.metadata?.name
    if (
      !c.hpas.some((h) => h.spec?.scaleTargetRef.kind === 'Deployment' && h.spec.scaleTargetRef.name === name)
    ) {
      problems.push(`${c.where}: no HorizontalPodAutoscaler targets the ${app} Deployment`)
    }
  }
  return problems
}

/** Every app is covered by one PodDisruptionBudget that still lets a node drain. */
export function checkDisruptionBudgets(c: Cluster): string[] {
  const problems: string[] = []
  for (const app of APP_NAMES) {
    const workload = appWorkload(c, app)
    if ('problem' in workload) continue
    const labels = podLabels(workload.deployment)
    const covering = c.pdbs.filter(
      (p) =>
        namespaceOf(p) === namespaceOf(workload.deployment) &&
        p.spec?.selector &&
        selects(p.spec.selector, labels),
    )
    if (covering.length !== 1) {
      problems.push(`${c.where}: ${app} is covered by ${covering.length} PodDisruptionBudgets, expected 1`)
      continue
    }
    const spec = covering[0]?.spec
    const maxUnavailable = spec?.maxUnavailable
    if (maxUnavailable === undefined || maxUnavailable === 0 || maxUnavailable === '0%') {
      problems.push(`${c.where}: ${app}'s PodDisruptionBudget must allow one pod to go (maxUnavailable >= 1)`)
    }
  }
  return problems
}

/** TLS on every host; every path goes to the gateway's Service, on a port it has. */
export function checkIngress(c: Cluster): string[] {
  const problems: string[] = []
  if (c.ingresses.length === 0) problems.push(`${c.where}: no Ingress`)
  const gateway = appWorkload(c, 'gateway')
  for (const ingress of c.ingresses) {
    const where = `${c.where}: Ingress ${ingress.metadata?.name}`
    const tlsHosts = new Set((ingress.spec?.tls ?? []).flatMap((t) => (t.secretName ? (t.hosts ?? []) : [])))
    if (tlsHosts.size === 0) problems.push(`${where}: no TLS`)
    if (ingress.spec?.defaultBackend) problems.push(`${where}: a default backend bypasses the host rules`)
    for (const rule of ingress.spec?.rules ?? []) {
      if (!rule.host || !tlsHosts.has(rule.host))
        problems.push(`${where}: host ${rule.host} is not covered by TLS`)
      for (const path of rule.http?.paths ?? []) {
        const backend = path.backend.service
        const service = c.services.find(
          (s) => s.metadata?.name === backend?.name && namespaceOf(s) === namespaceOf(ingress),
        )
        if (!service || 'problem' in gateway) {
          problems.push(`${where}: backend ${backend?.name} is not a Service of the build`)
          continue
        }
        if (!selects({ matchLabels: service.spec?.selector ?? {} }, podLabels(gateway.deployment))) {
          problems.push(`${where}: backend ${backend?.name} is not the gateway`)
        }
        const port = service.spec?.ports?.find((p) =>
          backend?.port?.name !== undefined ? p.name === backend.port.name : p.port === backend?.port?.number,
        )
        if (!port)
          problems.push(`${where}: Service ${backend?.name} has no port ${JSON.stringify(backend?.port)}`)
      }
    }
  }
  return problems
}

/** Stand-ins for the servers outside the namespace: private addresses, as in most clusters. */
const SERVER_ENDPOINTS: Record<ServerName, { ip: string; port: number }> = {
  mongo: { ip: '10.100.0.10', port: 27017 },
  nats: { ip: '10.100.0.11', port: 4222 },
  redis: { ip: '10.100.0.12', port: 6379 },
}

/**
 * The NetworkPolicies give exactly the reachability the architecture needs: the ingress
 * controller reaches the gateway only; each service is reached only by its callers; each
 * app reaches its servers, DNS and nothing else; only webhooks (any port) and runs (HTTPS,
 * for the model providers) reach the public internet, and neither reaches private addresses.
 */
export function checkNetworkPolicies(c: Cluster, ingressNamespace = 'traefik'): string[] {
  const problems: string[] = []
  const policies = c.networkPolicies
  const pods = new Map<AppName, Endpoint & { kind: 'pod' }>()
  const ports = new Map<AppName, number>()
  for (const app of APP_NAMES) {
    const workload = appWorkload(c, app)
    if ('problem' in workload) return [workload.problem]
    const named: Record<string, number> = {}
    for (const p of workload.container.ports ?? []) if (p.name) named[p.name] = p.containerPort
    pods.set(app, {
      kind: 'pod',
      namespace: namespaceOf(workload.deployment),
      labels: podLabels(workload.deployment),
      ports: named,
    })
    ports.set(app, workload.container.ports?.[0]?.containerPort ?? 0)
  }
  const namespace = pods.get('gateway')?.namespace ?? 'default'
  const sources: Array<[string, Endpoint]> = [
    ['the ingress controller', { kind: 'pod', namespace: ingressNamespace, labels: { [NAME]: 'traefik' } }],
    ['a pod of another namespace', { kind: 'pod', namespace: 'elsewhere', labels: { app: 'other' } }],
    ['another pod of this namespace', { kind: 'pod', namespace, labels: { app: 'debug' } }],
    ['an outside address', { kind: 'ip', ip: '198.51.100.7' }],
    ...[...pods].map(([name, pod]): [string, Endpoint] => [name, pod]),
  ]
  for (const target of APP_NAMES) {
    const to = pods.get(target)
    const port = ports.get(target) ?? 0
    if (!to) continue
    const expected = new Set<string>(target === 'gateway' ? ['the ingress controller'] : callersOf(target))
    for (const [name, from] of sources) {
      if (name === target) continue
      const ok = allowed(policies, { from, to, port })
      if (ok !== expected.has(name)) {
        problems.push(
          `${c.where}: ${name} -> ${target}:${port} is ${ok ? 'allowed' : 'blocked'}, expected ${ok ? 'blocked' : 'allowed'}`,
        )
      }
    }
  }
  // The metrics port: Prometheus (the monitoring namespace) only; and Prometheus nothing else.
  const prometheus: Endpoint = {
    kind: 'pod',
    namespace: 'monitoring',
    labels: { [NAME]: 'prometheus' },
  }
  for (const target of APP_NAMES) {
    const to = pods.get(target)
    const metricsPort = to?.kind === 'pod' ? to.ports?.metrics : undefined
    if (!to || metricsPort === undefined) continue
    for (const [name, from, expected] of [
      ['Prometheus', prometheus, true],
      ['the ingress controller', sources[0]?.[1], false],
      ['another pod of this namespace', sources[2]?.[1], false],
    ] as const) {
      if (!from) continue
      const ok = allowed(policies, { from, to, port: metricsPort })
      if (ok !== expected)
        problems.push(
          `${c.where}: ${name} -> ${target} metrics port ${metricsPort} is ${ok ? 'allowed' : 'blocked'}, expected ${ok ? 'blocked' : 'allowed'}`,
        )
    }
    if (allowed(policies, { from: prometheus, to, port: ports.get(target) ?? 0 }))
      problems.push(`${c.where}: Prometheus -> ${target} API port is allowed, expected blocked`)
  }
  for (const app of APP_NAMES) {
    const from = pods.get(app)
    if (!from) continue
    for (const server of Object.keys(SERVER_ENDPOINTS) as ServerName[]) {
      const { ip, port } = SERVER_ENDPOINTS[server]
      const ok = allowed(policies, { from, to: { kind: 'ip', ip }, port })
      const expected = APPS[app].servers.includes(server)
      if (ok !== expected) {
        problems.push(
          `${c.where}: ${app} -> ${server} (${SERVER_SETTING[server]}) is ${ok ? 'allowed' : 'blocked'}, expected ${ok ? 'blocked' : 'allowed'}`,
        )
      }
    }
    const dns = allowed(policies, { from, to: { kind: 'ip', ip: '10.96.0.10' }, port: 53, protocol: 'UDP' })
    if (!dns) problems.push(`${c.where}: ${app} cannot resolve names (UDP 53)`)
    for (const [label, ip, port, expected] of [
      ['the internet on 443', '203.0.113.10', 443, APPS[app].internet !== false],
      ['the internet on 8443', '203.0.113.10', 8443, APPS[app].internet === 'any-port'],
      ['a private address on 443', '10.1.2.3', 443, false],
      ['the cloud metadata address', '169.254.169.254', 80, false],
    ] as const) {
      const ok = allowed(policies, { from, to: { kind: 'ip', ip }, port })
      if (ok !== expected) {
        problems.push(
          `${c.where}: ${app} -> ${label} is ${ok ? 'allowed' : 'blocked'}, expected ${ok ? 'blocked' : 'allowed'}`,
        )
      }
    }
  }
  return problems
}

/** In an overlay: one namespace for everything, and it enforces the restricted profile. */
export function checkNamespace(c: Cluster): string[] {
  const problems: string[] = []
  const used = new Set(
    c.objects.filter((o) => o.kind !== 'Namespace').map((o) => o.metadata.namespace ?? 'default'),
  )
  if (used.size !== 1) return [`${c.where}: objects in ${used.size} namespaces: ${[...used].join(', ')}`]
  const [name] = [...used]
  const namespace = c.namespaces.find((n) => n.metadata?.name === name)
  if (!namespace) return [`${c.where}: namespace ${name} is not created by the build`]
  if (namespace.metadata?.labels?.['pod-security.kubernetes.io/enforce'] !== 'restricted') {
    problems.push(`${c.where}: namespace ${name} does not enforce the restricted Pod Security Standard`)
  }
  return problems
}

/** Settings two apps must agree on hold the same value in both. */
export function checkSharedSettings(c: Cluster): string[] {
  const problems: string[] = []
  const envOf = (app: AppName) => {
    const w = appWorkload(c, app)
    return 'problem' in w ? undefined : containerEnv(c, namespaceOf(w.deployment), w.container).env
  }
  const envs = APP_NAMES.map((app) => [app, envOf(app)] as const)
  const nats = new Set(
    envs.filter(([app]) => APPS[app].servers.includes('nats')).map(([, env]) => env?.NATS_URL),
  )
  if (nats.size !== 1) problems.push(`${c.where}: the apps are not on one NATS (${[...nats].join(', ')})`)
  const databases = envs
    .filter(([app]) => APPS[app].servers.includes('mongo'))
    .map(([, env]) => env?.MONGO_DB)
  if (new Set(databases).size !== databases.length) {
    problems.push(
      `${c.where}: services share a MongoDB database (${databases.join(', ')}); each owns its data`,
    )
  }
  const gateway = envOf('gateway')
  const identity = envOf('identity')
  for (const key of ['JWT_ISSUER', 'JWT_AUDIENCE']) {
    if (gateway?.[key] !== identity?.[key]) {
      problems.push(
        `${c.where}: ${key} differs between gateway (${gateway?.[key]}) and identity (${identity?.[key]})`,
      )
    }
  }
  const secretNames = APP_NAMES.map((app) => `${app}-secrets`)
  for (const name of secretNames) {
    const template = c.secretTemplates.find((s) => s.metadata?.name === name)
    if (!template?.stringData || !('INTERNAL_AUTH_SECRET' in template.stringData)) {
      problems.push(`${c.where}: Secret template ${name} lacks INTERNAL_AUTH_SECRET`)
    }
  }
  for (const o of c.objects) {
    if (o.kind !== 'Namespace' && o.metadata.labels?.[PART_OF] !== 'prompt-service') {
      problems.push(`${c.where}: ${o.kind}/${o.metadata.name} lacks the ${PART_OF} label`)
    }
  }
  return problems
}

const METRICS_PORT_NAME = 'metrics'

/**
 * Per app: METRICS_PORT set and different from the API port; a container port named
 * "metrics" on it; the pod annotated for Prometheus (scrape, that port, /metrics); no Service
 * publishes it (Prometheus scrapes pods; the Ingress reaches only Services).
 */
export function checkMetrics(c: Cluster): string[] {
  const problems: string[] = []
  for (const app of APP_NAMES) {
    const workload = appWorkload(c, app)
    if ('problem' in workload) continue
    const { deployment, container } = workload
    const where = `${c.where}: ${app}`
    const { env } = containerEnv(c, namespaceOf(deployment), container)
    const port = Number(env.METRICS_PORT)
    if (!env.METRICS_PORT) {
      problems.push(`${where}: METRICS_PORT is not set (no /metrics to scrape)`)
      continue
    }
    if (port === Number(env.PORT)) problems.push(`${where}: METRICS_PORT is the API port`)
    const named = container.ports?.find((p) => p.name === METRICS_PORT_NAME)
    if (named?.containerPort !== port)
      problems.push(`${where}: no container port "${METRICS_PORT_NAME}" on METRICS_PORT ${port}`)
    const annotations = deployment.spec?.template.metadata?.annotations ?? {}
    if (annotations['prometheus.io/scrape'] !== 'true')
      problems.push(`${where}: pod lacks the prometheus.io/scrape annotation`)
    if (annotations['prometheus.io/port'] !== String(port))
      problems.push(
        `${where}: prometheus.io/port is ${annotations['prometheus.io/port']}, METRICS_PORT is ${port}`,
      )
    if ((annotations['prometheus.io/path'] ?? '/metrics') !== '/metrics')
      problems.push(`${where}: prometheus.io/path must be /metrics`)
    for (const service of c.services) {
      if (!selects({ matchLabels: service.spec?.selector ?? {} }, podLabels(deployment))) continue
      for (const sp of service.spec?.ports ?? []) {
        if (sp.targetPort === METRICS_PORT_NAME || sp.targetPort === port || sp.port === port)
          problems.push(`${where}: Service ${service.metadata?.name} publishes the metrics port`)
      }
    }
  }
  return problems
}

/** Every check above, for one build. */
export function checkCluster(c: Cluster, opts: { overlay: boolean }): string[] {
  return [
    ...checkSchemas(c),
    ...checkSelectors(c),
    ...checkApps(c),
    ...checkCalls(c),
    ...checkAutoscaling(c),
    ...checkDisruptionBudgets(c),
    ...checkIngress(c),
    ...checkNetworkPolicies(c),
    ...checkMetrics(c),
    ...checkSharedSettings(c),
    ...(opts.overlay ? checkNamespace(c) : []),
  ]
}
