import { execFile } from 'node:child_process'
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import { describe, expect, it } from 'vitest'
import { buildOpenApiDocument, type HttpVerb } from '../src/index.ts'

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020
const run = promisify(execFile)

const doc = buildOpenApiDocument()
const DOC_ID = 'https://prompt-service.local/openapi.json'
const pointer = (...segments: string[]) =>
  segments.map((s) => s.replace(/~/g, '~0').replace(/\//g, '~1')).join('/')

describe('the OpenAPI document for readers and generators', () => {
  it('lists a server, with the host as a variable', () => {
    expect(doc.servers).toHaveLength(1)
    expect(doc.servers[0]?.url).toBe('{scheme}://{host}')
    expect(doc.servers[0]?.variables?.host?.default).toBe('localhost:8080')
    expect(buildOpenApiDocument({ serverUrl: 'https://prompts.example.com' }).servers).toEqual([
      { url: 'https://prompts.example.com' },
    ])
  })

  it('gives every operation a request example (when it takes a body) and a response example for each JSON answer, each valid against its schema', () => {
    // inlineRefs: false compiles each referenced schema once, as its own function, instead of
    // copying it into every schema that refers to it: the same checks, about 1.5 s instead of
    // 6 s for the 843 examples (the shared components are referred to hundreds of times).
    const ajv = new Ajv2020({ strict: false, allErrors: true, inlineRefs: false })
    addFormats(ajv)
    ajv.addSchema({ ...doc, $id: DOC_ID } as unknown as object)
    let checked = 0
    for (const [path, item] of Object.entries(doc.paths)) {
      for (const [verb, op] of Object.entries(item) as [HttpVerb, NonNullable<(typeof item)[HttpVerb]>][]) {
        const at = `${verb.toUpperCase()} ${path}`
        const media: Array<[string, { example?: unknown }, string]> = []
        for (const [type, m] of Object.entries(op.requestBody?.content ?? {}))
          media.push([
            pointer('paths', path, verb, 'requestBody', 'content', type, 'schema'),
            m,
            `${at} request`,
          ])
        for (const [status, response] of Object.entries(op.responses)) {
          const json = response.content?.['application/json']
          if (json)
            media.push([
              pointer('paths', path, verb, 'responses', status, 'content', 'application/json', 'schema'),
              json,
              `${at} ${status}`,
            ])
        }
        for (const [ref, m, where] of media) {
          expect(m.example, where).toBeDefined()
          const check = ajv.compile({ $ref: `${DOC_ID}#/${ref}` })
          expect(check(m.example), `${where}: ${ajv.errorsText(check.errors)}`).toBe(true)
          checked++
        }
        for (const param of op.parameters ?? []) expect(param.example, `${at} ${param.name}`).toBeDefined()
      }
    }
    expect(checked).toBeGreaterThan(300)
    // One of them, read as a person would: the invoke request renders the example template.
    const invoke = doc.paths['/api/v1/prompts/{id}/invoke']?.post
    expect(invoke?.requestBody?.content['application/json']?.example).toMatchObject({
      variables: { name: 'Ada', place: 'London' },
    })
    // Over 300 schema compilations: 40 s when CI's two cores also ran the other packages' tests
    // with referenced schemas inlined.
  }, 180_000)

  it("passes Redocly's recommended lint (redocly.yaml) with no error and no warning", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pm-redocly-'))
    try {
      const file = join(dir, 'openapi.json')
      writeFileSync(file, JSON.stringify(doc))
      const cli = join(
        dirname(createRequire(import.meta.url).resolve('@redocly/cli/package.json')),
        'bin/cli.js',
      )
      const { stdout } = await run(
        process.execPath,
        [
          cli,
          'lint',
          file,
          '--config',
          fileURLToPath(new URL('../redocly.yaml', import.meta.url)),
          '--format',
          'json',
          '--max-problems',
          '10000',
        ],
        { env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' } },
      ).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }))
      const report = JSON.parse(stdout.slice(stdout.indexOf('{'))) as {
        totals: { errors: number; warnings: number }
        problems: Array<{ ruleId: string; severity: string; message: string }>
      }
      // Everything of `recommended` but no-ambiguous-paths (off in redocly.yaml, with its reason).
      expect(report.problems.slice(0, 5)).toEqual([])
      expect(report.totals).toMatchObject({ errors: 0, warnings: 0 })
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  }, 180_000)
})
