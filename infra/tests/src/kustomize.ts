import { existsSync, readFileSync, statSync } from 'node:fs'
import { join, resolve } from 'node:path'
import { parseAllDocuments } from 'yaml'

/** A Kubernetes object as read from YAML, before schema validation. */
export interface K8sObject {
  apiVersion: string
  kind: string
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; [key: string]: unknown }
  [key: string]: unknown
}

/** The fields of kustomization.yaml this reader understands; any other one is an error. */
const SUPPORTED_FIELDS = new Set(['apiVersion', 'kind', 'resources', 'namespace', 'images', 'patches'])

/** Kinds that live outside namespaces (the namespace transformer leaves them alone). */
const CLUSTER_SCOPED = new Set([
  'Namespace',
  'ClusterRole',
  'ClusterRoleBinding',
  'CustomResourceDefinition',
  'PersistentVolume',
  'StorageClass',
  'PriorityClass',
  'IngressClass',
])

interface ImageRule {
  name: string
  newName?: string
  newTag?: string
  digest?: string
}

interface PatchTarget {
  group?: string
  version?: string
  kind?: string
  name?: string
  namespace?: string
  labelSelector?: string
}

interface PatchEntry {
  path?: string
  patch?: string
  target?: PatchTarget
}

export interface JsonPatchOp {
  op: string
  path: string
  value?: unknown
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value)
}

/** Every non-empty document of a YAML file (or string), as plain values. */
export function readYamlDocuments(text: string, source: string): unknown[] {
  const docs = parseAllDocuments(text, { merge: true })
  if (!Array.isArray(docs)) throw new Error(`${source}: not a YAML stream`)
  return docs
    .map((doc) => {
      if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors.map((e) => e.message).join('; ')}`)
      return doc.toJS() as unknown
    })
    .filter((value) => value !== null && value !== undefined)
}

function asObject(value: unknown, source: string): K8sObject {
  if (
    !isRecord(value) ||
    typeof value.apiVersion !== 'string' ||
    typeof value.kind !== 'string' ||
    !isRecord(value.metadata) ||
    typeof value.metadata.name !== 'string'
  ) {
    throw new Error(`${source}: a document without apiVersion, kind and metadata.name`)
  }
  return value as K8sObject
}

/** Reads every Kubernetes object of one YAML file. */
export function readManifestFile(file: string): K8sObject[] {
  return readYamlDocuments(readFileSync(file, 'utf8'), file).map((doc) => asObject(doc, file))
}

function kustomizationFile(dir: string): string {
  for (const name of ['kustomization.yaml', 'kustomization.yml', 'Kustomization']) {
    const file = join(dir, name)
    if (existsSync(file)) return file
  }
  throw new Error(`${dir}: no kustomization.yaml`)
}

/**
 * Builds a kustomization directory the way `kustomize build` does, for the subset of fields
 * the manifests use: `resources` (files and kustomization directories), `patches` (JSON 6902
 * patches, inline or from a file, with a target), `images` and `namespace`. Any other field
 * is an error, so that a manifest change the reader cannot follow fails loudly.
 */
export function kustomizeBuild(dir: string): K8sObject[] {
  const file = kustomizationFile(dir)
  const [doc] = readYamlDocuments(readFileSync(file, 'utf8'), file)
  if (!isRecord(doc)) throw new Error(`${file}: not a mapping`)
  for (const key of Object.keys(doc)) {
    if (!SUPPORTED_FIELDS.has(key)) throw new Error(`${file}: field "${key}" is not supported by this reader`)
  }

  const objects: K8sObject[] = []
  for (const entry of (doc.resources as unknown[] | undefined) ?? []) {
    if (typeof entry !== 'string') throw new Error(`${file}: a resource is not a path`)
    const path = resolve(dir, entry)
    if (!existsSync(path)) throw new Error(`${file}: resource ${entry} does not exist`)
    objects.push(...(statSync(path).isDirectory() ? kustomizeBuild(path) : readManifestFile(path)))
  }
  assertUnique(objects, file)

  for (const entry of (doc.patches as PatchEntry[] | undefined) ?? []) {
    const ops = readPatch(entry, dir, file)
    if (!entry.target) throw new Error(`${file}: a JSON 6902 patch needs a target`)
    const targets = objects.filter((o) => matchesTarget(o, entry.target ?? {}))
    if (targets.length === 0)
      throw new Error(`${file}: patch target ${JSON.stringify(entry.target)} matches nothing`)
    for (const target of targets) {
      const patched = applyJsonPatch(target, ops) as K8sObject
      objects[objects.indexOf(target)] = patched
    }
  }

  const images = (doc.images as ImageRule[] | undefined) ?? []
  for (const object of objects) for (const rule of images) setImages(object, rule)

  if (typeof doc.namespace === 'string') {
    for (const object of objects) {
      if (!CLUSTER_SCOPED.has(object.kind)) object.metadata.namespace = doc.namespace
    }
  }
  return objects
}

function assertUnique(objects: K8sObject[], file: string): void {
  const seen = new Set<string>()
  for (const o of objects) {
    const id = `${o.kind}/${o.metadata.namespace ?? ''}/${o.metadata.name}`
    if (seen.has(id)) throw new Error(`${file}: ${id} is defined twice`)
    seen.add(id)
  }
}

function readPatch(entry: PatchEntry, dir: string, file: string): JsonPatchOp[] {
  const text = entry.patch ?? (entry.path ? readFileSync(resolve(dir, entry.path), 'utf8') : undefined)
  if (text === undefined) throw new Error(`${file}: a patch has neither path nor patch`)
  const [ops] = readYamlDocuments(text, file)
  if (!Array.isArray(ops)) {
    throw new Error(`${file}: only JSON 6902 patches (a list of operations) are supported by this reader`)
  }
  return ops as JsonPatchOp[]
}

/** Target matching as kustomize does it: name and namespace are anchored regular expressions. */
export function matchesTarget(object: K8sObject, target: PatchTarget): boolean {
  const [group, version] = object.apiVersion.includes('/')
    ? (object.apiVersion.split('/') as [string, string])
    : ['', object.apiVersion]
  const regex = (pattern: string, value: string) => new RegExp(`^(?:${pattern})$`).test(value)
  if (target.kind !== undefined && target.kind !== object.kind) return false
  if (target.group !== undefined && target.group !== group) return false
  if (target.version !== undefined && target.version !== version) return false
  if (target.name !== undefined && !regex(target.name, object.metadata.name)) return false
  if (target.namespace !== undefined && !regex(target.namespace, object.metadata.namespace ?? ''))
    return false
  if (target.labelSelector !== undefined) {
    const labels = object.metadata.labels ?? {}
    for (const term of target.labelSelector.split(',')) {
      const [key, value] = term.split('=').map((s) => s.trim())
      if (key === undefined || value === undefined || term.includes('!')) {
        throw new Error(`labelSelector "${target.labelSelector}": only key=value terms are supported`)
      }
      if (labels[key] !== value) return false
    }
  }
  return true
}

function decodePointer(path: string): string[] {
  if (path === '') return []
  if (!path.startsWith('/')) throw new Error(`JSON pointer "${path}" must start with /`)
  return path
    .slice(1)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
}

/** RFC 6902 add, remove, replace and test, on a copy. */
export function applyJsonPatch(document: unknown, ops: JsonPatchOp[]): unknown {
  const root: unknown = structuredClone(document)
  for (const op of ops) {
    const tokens = decodePointer(op.path)
    const last = tokens.pop()
    if (last === undefined) throw new Error(`${op.op} ${op.path}: cannot patch the whole document`)
    let parent: unknown = root
    for (const token of tokens) {
      parent = Array.isArray(parent) ? parent[Number(token)] : isRecord(parent) ? parent[token] : undefined
      if (parent === undefined) throw new Error(`${op.op} ${op.path}: path does not exist`)
    }
    if (Array.isArray(parent)) {
      const index = last === '-' ? parent.length : Number(last)
      if (!Number.isInteger(index) || index < 0 || index > parent.length) {
        throw new Error(`${op.op} ${op.path}: bad array index`)
      }
      const exists = index < parent.length
      if (op.op === 'add') parent.splice(index, 0, structuredClone(op.value))
      else if (!exists) throw new Error(`${op.op} ${op.path}: path does not exist`)
      else if (op.op === 'remove') parent.splice(index, 1)
      else if (op.op === 'replace') parent[index] = structuredClone(op.value)
      else if (op.op === 'test') assertEqual(parent[index], op)
      else throw new Error(`JSON patch op "${op.op}" is not supported by this reader`)
    } else if (isRecord(parent)) {
      const exists = Object.hasOwn(parent, last)
      if (op.op === 'add') parent[last] = structuredClone(op.value)
      else if (!exists) throw new Error(`${op.op} ${op.path}: path does not exist`)
      else if (op.op === 'remove') delete parent[last]
      else if (op.op === 'replace') parent[last] = structuredClone(op.value)
      else if (op.op === 'test') assertEqual(parent[last], op)
      else throw new Error(`JSON patch op "${op.op}" is not supported by this reader`)
    } else {
      throw new Error(`${op.op} ${op.path}: parent is not an object or array`)
    }
  }
  return root
}

function assertEqual(actual: unknown, op: JsonPatchOp): void {
  if (JSON.stringify(actual) !== JSON.stringify(op.value)) throw new Error(`test ${op.path}: value differs`)
}

/** Splits "registry:5000/a/b:tag@sha256:..." into name, tag and digest. */
export function parseImage(image: string): { name: string; tag?: string; digest?: string } {
  const [rest = '', digest] = image.split('@') as [string, string | undefined]
  const slash = rest.lastIndexOf('/')
  const colon = rest.lastIndexOf(':')
  const hasTag = colon > slash
  return {
    name: hasTag ? rest.slice(0, colon) : rest,
    ...(hasTag ? { tag: rest.slice(colon + 1) } : {}),
    ...(digest ? { digest } : {}),
  }
}

function setImages(object: K8sObject, rule: ImageRule): void {
  const spec = podSpecOf(object)
  if (!spec) return
  for (const key of ['containers', 'initContainers']) {
    const containers = spec[key]
    if (!Array.isArray(containers)) continue
    for (const container of containers) {
      if (!isRecord(container) || typeof container.image !== 'string') continue
      const image = parseImage(container.image)
      if (image.name !== rule.name) continue
      const name = rule.newName ?? image.name
      const digest = rule.digest ?? (rule.newTag ? undefined : image.digest)
      const tag = digest ? undefined : (rule.newTag ?? image.tag)
      container.image = `${name}${tag ? `:${tag}` : ''}${digest ? `@${digest}` : ''}`
    }
  }
}

/** The pod spec inside a workload (Deployment, StatefulSet, DaemonSet, Job, Pod). */
export function podSpecOf(object: K8sObject): Record<string, unknown> | undefined {
  const spec = object.spec
  if (!isRecord(spec)) return undefined
  if (object.kind === 'Pod') return spec
  const template = spec.template
  return isRecord(template) && isRecord(template.spec) ? template.spec : undefined
}
