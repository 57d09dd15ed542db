import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js'
import addFormatsModule from 'ajv-formats'
import type { HttpVerb, OpenApiDocument, OpenApiOperation } from './document.ts'

/**
 * Checks real responses against the document: the route must be documented, the status
 * listed for it, and the body valid against that status's schema. The end-to-end tests feed
 * it every response they see, so the document cannot drift from what the service answers.
 */

export interface SeenResponse {
  method: string
  /** Path with or without query string (`/api/v1/prompts/abc?x=1`) or a full URL. */
  url: string
  status: number
  contentType: string | null
  /** Parsed JSON, or the text when it is not JSON, or null when empty. */
  body: unknown
}

export type ValidationOutcome = { ok: true; operationId: string } | { ok: false; message: string }

// ajv-formats is CommonJS with a default export; under NodeNext it arrives as the module.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020

const DOC_ID = 'https://prompt-service.local/openapi.json'

interface Template {
  path: string
  pattern: RegExp
  params: number
}

function escapePointer(segment: string): string {
  return segment.replace(/~/g, '~0').replace(/\//g, '~1')
}

export class ResponseValidator {
  private readonly doc: OpenApiDocument
  private readonly ajv: Ajv2020
  private readonly templates: Template[]
  private readonly compiled = new Map<string, ValidateFunction>()

  constructor(doc: OpenApiDocument) {
    this.doc = doc
    this.ajv = new Ajv2020({ strict: false, allErrors: true })
    addFormats(this.ajv)
    // The whole document is one schema resource: every `#/components/...` reference inside an
    // operation resolves against it, and each response schema is reached by JSON pointer.
    this.ajv.addSchema({ ...doc, $id: DOC_ID } as unknown as object)
    this.templates = Object.keys(doc.paths)
      .map((path) => ({
        path,
        pattern: new RegExp(`^${path.replace(/[.*+?^$()|[\]\\]/g, '\\$&').replace(/\{[^}]+\}/g, '[^/]+')}$`),
        params: (path.match(/\{/g) ?? []).length,
      }))
      // A static segment wins over a parameter (`/versions/diff` before `/versions/{versionId}`).
      .sort((a, b) => a.params - b.params)
  }

  /** The documented path template a concrete path belongs to. */
  templateFor(method: string, url: string): { path: string; operation: OpenApiOperation } | null {
    const path = (url.startsWith('http') ? new URL(url).pathname : (url.split('?', 1)[0] ?? url)).replace(
      /\/+$/,
      '',
    )
    const verb = method.toLowerCase() as HttpVerb
    for (const t of this.templates) {
      const operation = this.doc.paths[t.path]?.[verb]
      if (operation && t.pattern.test(path)) return { path: t.path, operation }
    }
    return null
  }

  validate(seen: SeenResponse): ValidationOutcome {
    const found = this.templateFor(seen.method, seen.url)
    if (!found) return { ok: false, message: `${seen.method} ${seen.url} is not in the document` }
    const { path, operation } = found
    const status = String(seen.status)
    const key = [status, `${status[0]}XX`, 'default'].find((k) => operation.responses[k])
    const where = `${seen.method} ${path} → ${seen.status}`
    if (!key) return { ok: false, message: `${where}: status not documented` }
    const response = operation.responses[key]
    const content = response?.content
    if (!content) {
      const empty = seen.body === null || seen.body === ''
      return empty
        ? { ok: true, operationId: operation.operationId }
        : { ok: false, message: `${where}: documented without a body, got one` }
    }
    const type = (seen.contentType ?? '').split(';', 1)[0]?.trim() ?? ''
    if (!content[type]) {
      return { ok: false, message: `${where}: content type ${type || '(none)'} not documented` }
    }
    if (type !== 'application/json') return { ok: true, operationId: operation.operationId }
    const pointer = ['paths', path, seen.method.toLowerCase(), 'responses', key, 'content', type, 'schema']
      .map(escapePointer)
      .join('/')
    const ref = `${DOC_ID}#/${pointer}`
    let check = this.compiled.get(ref)
    if (!check) {
      check = this.ajv.compile({ $ref: ref })
      this.compiled.set(ref, check)
    }
    if (check(seen.body)) return { ok: true, operationId: operation.operationId }
    return {
      ok: false,
      message: `${where}: body does not match the document: ${this.ajv.errorsText(check.errors, { separator: '; ' })}\n${JSON.stringify(seen.body).slice(0, 2000)}`,
    }
  }
}

export function createResponseValidator(doc: OpenApiDocument): ResponseValidator {
  return new ResponseValidator(doc)
}
