import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { INetworkPolicyPeer } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyPeer'
import type { INetworkPolicyPort } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyPort'

type LabelSelector = NonNullable<INetworkPolicyPeer['podSelector']>

/** A pod (with its namespace and named ports) or an address outside the cluster's pods. */
export type Endpoint =
  | { kind: 'pod'; namespace: string; labels: Record<string, string>; ports?: Record<string, number> }
  | { kind: 'ip'; ip: string }

export interface Connection {
  from: Endpoint
  to: Endpoint
  port: number
  protocol?: 'TCP' | 'UDP'
}

/** Label selector semantics: matchLabels and matchExpressions, all terms ANDed; {} selects all. */
export function selects(selector: LabelSelector | undefined, labels: Record<string, string>): boolean {
  if (!selector) return true
  for (const [key, value] of Object.entries(selector.matchLabels ?? {}))
    if (labels[key] !== value) return false
  for (const expr of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, expr.key)
    const value = labels[expr.key]
    const values = expr.values ?? []
    if (expr.operator === 'In' && !(has && values.includes(value ?? ''))) return false
    if (expr.operator === 'NotIn' && has && values.includes(value ?? '')) return false
    if (expr.operator === 'Exists' && !has) return false
    if (expr.operator === 'DoesNotExist' && has) return false
  }
  return true
}

function ipv4(ip: string): number {
  const parts = ip.split('.').map(Number)
  if (parts.length !== 4 || parts.some((p) => !Number.isInteger(p) || p < 0 || p > 255)) {
    throw new Error(`not an IPv4 address: ${ip}`)
  }
  return parts.reduce((n, p) => n * 256 + p, 0)
}

export function inCidr(ip: string, cidr: string): boolean {
  const [base = '', bits = '32'] = cidr.split('/')
  const size = 2 ** (32 - Number(bits))
  const start = Math.floor(ipv4(base) / size) * size
  const n = ipv4(ip)
  return n >= start && n < start + size
}

/** Namespaces carry the label kubernetes.io/metadata.name (set by the API server). */
function namespaceLabels(namespace: string): Record<string, string> {
  return { 'kubernetes.io/metadata.name': namespace }
}

/** Does a peer of a policy in `policyNamespace` match `endpoint`? */
function peerMatches(peer: INetworkPolicyPeer, endpoint: Endpoint, policyNamespace: string): boolean {
  if (peer.ipBlock) {
    // ipBlock is meant for addresses outside the cluster's pods; pods are matched by selectors.
    if (endpoint.kind !== 'ip') return false
    return (
      inCidr(endpoint.ip, peer.ipBlock.cidr) &&
      !(peer.ipBlock.except ?? []).some((c) => inCidr(endpoint.ip, c))
    )
  }
  if (endpoint.kind !== 'pod') return false
  const namespaceOk = peer.namespaceSelector
    ? selects(peer.namespaceSelector, namespaceLabels(endpoint.namespace))
    : endpoint.namespace === policyNamespace
  return namespaceOk && selects(peer.podSelector, endpoint.labels)
}

function portMatches(ports: INetworkPolicyPort[] | undefined, conn: Connection, target: Endpoint): boolean {
  if (!ports || ports.length === 0) return true
  return ports.some((p) => {
    if ((p.protocol ?? 'TCP') !== (conn.protocol ?? 'TCP')) return false
    if (p.port === undefined) return true
    const number =
      typeof p.port === 'number' ? p.port : target.kind === 'pod' ? target.ports?.[p.port] : undefined
    if (number === undefined) return false
    return p.endPort === undefined ? number === conn.port : conn.port >= number && conn.port <= p.endPort
  })
}

function policyTypes(policy: INetworkPolicy): string[] {
  const spec = policy.spec
  if (spec?.policyTypes) return spec.policyTypes
  return spec?.egress ? ['Ingress', 'Egress'] : ['Ingress']
}

function isolating(
  policies: INetworkPolicy[],
  pod: Endpoint,
  direction: 'Ingress' | 'Egress',
): INetworkPolicy[] {
  if (pod.kind !== 'pod') return []
  return policies.filter(
    (p) =>
      (p.metadata?.namespace ?? 'default') === pod.namespace &&
      policyTypes(p).includes(direction) &&
      selects(p.spec?.podSelector, pod.labels),
  )
}

/**
 * Whether the NetworkPolicies let a connection through, as the API defines it: a pod that no
 * policy selects for a direction is open in that direction; a selected pod accepts only what
 * some rule of a selecting policy allows; a connection needs both the source's egress and the
 * destination's ingress. (IPv4 only.)
 */
export function allowed(policies: INetworkPolicy[], conn: Connection): boolean {
  const egressOk = (() => {
    const selecting = isolating(policies, conn.from, 'Egress')
    if (conn.from.kind !== 'pod' || selecting.length === 0) return true
    return selecting.some((p) =>
      (p.spec?.egress ?? []).some(
        (rule) =>
          (!rule.to || rule.to.length === 0 || rule.to.some((peer) => peerMatches(peer, conn.to, ns(p)))) &&
          portMatches(rule.ports, conn, conn.to),
      ),
    )
  })()
  const ingressOk = (() => {
    const selecting = isolating(policies, conn.to, 'Ingress')
    if (conn.to.kind !== 'pod' || selecting.length === 0) return true
    return selecting.some((p) =>
      (p.spec?.ingress ?? []).some(
        (rule) =>
          (!rule.from ||
            rule.from.length === 0 ||
            rule.from.some((peer) => peerMatches(peer, conn.from, ns(p)))) &&
          portMatches(rule.ports, conn, conn.to),
      ),
    )
  })()
  return egressOk && ingressOk
}

function ns(policy: INetworkPolicy): string {
  return policy.metadata?.namespace ?? 'default'
}
