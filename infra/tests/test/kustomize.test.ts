import { mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import { APP_NAMES } from '../src/apps.ts'
import {
  applyJsonPatch,
  kustomizeBuild,
  matchesTarget,
  parseImage,
  readYamlDocuments,
} from '../src/kustomize.ts'

const BASE = fileURLToPath(new URL('../../k8s/base', import.meta.url))

function yamlFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? yamlFiles(join(dir, e.name)) : e.name.endsWith('.yaml') ? [join(dir, e.name)] : [],
  )
}

describe('infra/k8s/base/kustomization.yaml', () => {
  it('lists every manifest under the base (no file of a new service forgotten), never a Secret template', () => {
    const [kustomization] = readYamlDocuments(
      readFileSync(join(BASE, 'kustomization.yaml'), 'utf8'),
      'kustomization.yaml',
    ) as [{ resources: string[] }]
    const files = yamlFiles(BASE)
      .map((f) => relative(BASE, f))
      .filter((f) => f !== 'kustomization.yaml' && !f.endsWith('.template.yaml'))
      .sort()
    expect([...kustomization.resources].sort()).toEqual(files)
    for (const app of APP_NAMES) {
      expect(files.filter((f) => f.startsWith(`${app}/`)).length, app).toBeGreaterThanOrEqual(6)
    }
  })
})

function tree(files: Record<string, string>): string {
  const root = mkdtempSync(join(tmpdir(), 'pm-kustomize-'))
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(join(root, path, '..'), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

const DEPLOYMENT = `apiVersion: apps/v1
kind: Deployment
metadata: { name: web, labels: { tier: front } }
spec:
  replicas: 2
  template:
    spec:
      containers:
        - { name: web, image: "example/web:1.0" }
        - { name: side, image: "example/side" }
`

describe('the kustomize reader', () => {
  it('builds resources of a base through an overlay: patches, images, namespace', () => {
    const root = tree({
      'base/kustomization.yaml': 'resources: [web.yaml, cm.yaml]\n',
      'base/web.yaml': DEPLOYMENT,
      'base/cm.yaml': 'apiVersion: v1\nkind: ConfigMap\nmetadata: { name: web-config }\ndata: { A: "1" }\n',
      'overlay/kustomization.yaml': [
        'namespace: shop',
        'resources: [ns.yaml, ../base]',
        'images: [{ name: example/web, newName: reg.io/web, newTag: "2.0" }, { name: example/side, digest: "sha256:abc" }]',
        'patches:',
        '  - target: { kind: Deployment, name: w.b }',
        '    patch: |-',
        '      - { op: replace, path: /spec/replicas, value: 5 }',
        '      - { op: add, path: /spec/template/spec/containers/-, value: { name: extra } }',
        '  - path: cm-patch.yaml',
        '    target: { kind: ConfigMap }',
      ].join('\n'),
      'overlay/ns.yaml': 'apiVersion: v1\nkind: Namespace\nmetadata: { name: shop }\n',
      'overlay/cm-patch.yaml': '- { op: add, path: /data/B, value: "2" }\n- { op: remove, path: /data/A }\n',
    })
    const objects = kustomizeBuild(join(root, 'overlay'))
    const deployment = objects.find((o) => o.kind === 'Deployment') as unknown as {
      spec: { replicas: number; template: { spec: { containers: Array<{ image?: string }> } } }
    }
    expect(deployment.spec.replicas).toBe(5)
    expect(deployment.spec.template.spec.containers.map((c) => c.image)).toEqual([
      'reg.io/web:2.0',
      'example/side@sha256:abc',
      undefined,
    ])
    expect(objects.find((o) => o.kind === 'ConfigMap')?.data).toEqual({ B: '2' })
    expect(objects.map((o) => o.metadata.namespace)).toEqual([undefined, 'shop', 'shop'])
  })

  it('refuses fields it cannot follow, patches that match nothing, strategic merge patches', () => {
    const base = { 'base/web.yaml': DEPLOYMENT }
    const build =
      (k: string, extra: Record<string, string> = {}) =>
      () =>
        kustomizeBuild(join(tree({ ...base, ...extra, 'base/kustomization.yaml': k }), 'base'))
    expect(build('resources: [web.yaml]\nconfigMapGenerator: []\n')).toThrow(
      /"configMapGenerator" is not supported/,
    )
    expect(
      build(
        'resources: [web.yaml]\npatches: [{ target: { kind: Service }, patch: "[{op: remove, path: /a}]" }]\n',
      ),
    ).toThrow(/matches nothing/)
    expect(
      build('resources: [web.yaml]\npatches: [{ path: p.yaml, target: { kind: Deployment } }]\n', {
        'base/p.yaml': 'spec: { replicas: 3 }\n',
      }),
    ).toThrow(/only JSON 6902 patches/)
    expect(build('resources: [web.yaml, web.yaml]\n')).toThrow(/defined twice/)
  })

  it('applies JSON 6902 operations, and fails on a path that does not exist', () => {
    const doc = { a: { b: [1, 2] } }
    expect(applyJsonPatch(doc, [{ op: 'add', path: '/a/b/1', value: 9 }])).toEqual({ a: { b: [1, 9, 2] } })
    expect(applyJsonPatch(doc, [{ op: 'remove', path: '/a/b/0' }])).toEqual({ a: { b: [2] } })
    expect(applyJsonPatch(doc, [{ op: 'add', path: '/a/c~1d', value: 1 }])).toEqual({
      a: { b: [1, 2], 'c/d': 1 },
    })
    expect(doc).toEqual({ a: { b: [1, 2] } })
    expect(() => applyJsonPatch(doc, [{ op: 'replace', path: '/a/x', value: 1 }])).toThrow(/does not exist/)
    expect(() => applyJsonPatch(doc, [{ op: 'test', path: '/a/b/0', value: 2 }])).toThrow(/differs/)
    expect(() => applyJsonPatch(doc, [{ op: 'move', path: '/a/b' }])).toThrow(/not supported/)
  })

  it('matches targets and reads image references like kustomize', () => {
    const object = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'render', labels: { a: 'b' } },
    }
    expect(matchesTarget(object, { kind: 'Deployment', name: 'identity|render' })).toBe(true)
    expect(matchesTarget(object, { name: 'rend' })).toBe(false)
    expect(matchesTarget(object, { group: 'apps', version: 'v1', labelSelector: 'a=b' })).toBe(true)
    expect(matchesTarget(object, { labelSelector: 'a=c' })).toBe(false)
    expect(parseImage('reg:5000/a/b:1.2@sha256:ff')).toEqual({
      name: 'reg:5000/a/b',
      tag: '1.2',
      digest: 'sha256:ff',
    })
    expect(parseImage('reg:5000/a/b')).toEqual({ name: 'reg:5000/a/b' })
  })
})
