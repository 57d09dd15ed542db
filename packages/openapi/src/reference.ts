import type { HttpVerb, JsonSchema, OpenApiDocument, OpenApiOperation, OpenApiResponse } from './document.ts'

/**
 * A browsable reference page rendered from the document on the server: plain HTML and CSS,
 * no script and nothing fetched from elsewhere, so it works on a machine with no internet
 * access and under a strict content security policy.
 */

const VERBS: HttpVerb[] = ['get', 'post', 'patch', 'delete']
const REF = '#/components/schemas/'

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;')
}

/** The little Markdown the descriptions use: paragraphs, **bold** and `code`. */
function prose(text: string | undefined): string {
  if (!text) return ''
  return text
    .split(/\n{2,}/)
    .map(
      (para) =>
        `<p>${escapeHtml(para)
          .replace(/\*\*([^*]+)\*\*/g, '<strong>$1</strong>')
          .replace(/`([^`]+)`/g, '<code>$1</code>')}</p>`,
    )
    .join('')
}

const anchor = (kind: 'op' | 'schema' | 'tag', name: string) =>
  `${kind}-${name.replace(/[^A-Za-z0-9_-]/g, '-')}`

function refName(schema: JsonSchema): string | null {
  return typeof schema.$ref === 'string' && schema.$ref.startsWith(REF) ? schema.$ref.slice(REF.length) : null
}

/** A one-line type: `string (date-time)`, `array of Prompt`, `Pin | null`, ... */
function typeText(schema: JsonSchema | undefined): string {
  if (!schema || Object.keys(schema).length === 0) return 'any'
  const name = refName(schema)
  if (name) return `<a href="#${anchor('schema', name)}">${escapeHtml(name)}</a>`
  if (Array.isArray(schema.anyOf)) return (schema.anyOf as JsonSchema[]).map(typeText).join(' | ')
  if (Array.isArray(schema.allOf)) return (schema.allOf as JsonSchema[]).map(typeText).join(' &amp; ')
  if (schema.const !== undefined) return `<code>${escapeHtml(JSON.stringify(schema.const))}</code>`
  if (Array.isArray(schema.enum))
    return schema.enum.map((v) => `<code>${escapeHtml(JSON.stringify(v))}</code>`).join(' | ')
  const type = schema.type
  if (type === 'array') return `array of ${typeText(schema.items as JsonSchema | undefined)}`
  if (type === 'object') {
    if (schema.properties) return 'object'
    const values = schema.patternProperties
      ? Object.values(schema.patternProperties as Record<string, JsonSchema>)[0]
      : (schema.additionalProperties as JsonSchema | undefined)
    return `map of ${typeText(typeof values === 'object' ? values : undefined)}`
  }
  const format = typeof schema.format === 'string' ? ` (${escapeHtml(schema.format)})` : ''
  return `${escapeHtml(String(type ?? 'any'))}${format}`
}

function constraints(schema: JsonSchema): string {
  const parts: string[] = []
  const pick = (key: string, label: string) => {
    if (schema[key] !== undefined) parts.push(`${label} ${escapeHtml(JSON.stringify(schema[key]))}`)
  }
  pick('minLength', 'min length')
  pick('maxLength', 'max length')
  pick('minimum', 'min')
  pick('maximum', 'max')
  pick('minItems', 'min items')
  pick('maxItems', 'max items')
  pick('pattern', 'pattern')
  pick('default', 'default')
  return parts.length ? `<span class="muted">${parts.join(', ')}</span>` : ''
}

/** A table of an object's properties (nested objects get their own table). */
function propertiesTable(schema: JsonSchema): string {
  const props = schema.properties as Record<string, JsonSchema> | undefined
  if (!props) return ''
  const required = new Set((schema.required ?? []) as string[])
  const rows = Object.entries(props).map(([name, prop]) => {
    const nested = prop.type === 'object' && prop.properties ? propertiesTable(prop) : ''
    const items = prop.items as JsonSchema | undefined
    const nestedItems = items?.type === 'object' && items.properties ? propertiesTable(items) : ''
    return `<tr><td><code>${escapeHtml(name)}</code>${required.has(name) ? '' : ' <span class="muted">optional</span>'}</td><td>${typeText(prop)} ${constraints(prop)}${prose(typeof prop.description === 'string' ? prop.description : undefined)}${nested}${nestedItems}</td></tr>`
  })
  const closed =
    schema.additionalProperties === false ? '<p class="muted">No other fields are accepted.</p>' : ''
  return `<table class="props"><tbody>${rows.join('')}</tbody></table>${closed}`
}

function schemaBlock(schema: JsonSchema): string {
  const name = refName(schema)
  if (name) return `<p>${typeText(schema)}</p>`
  if (schema.type === 'object' && schema.properties) return propertiesTable(schema)
  return `<p>${typeText(schema)}</p>`
}

/** An example, pretty-printed (folded away, so the page stays short). */
function exampleBlock(example: unknown, label: string): string {
  if (example === undefined) return ''
  return `<details class="example"><summary>${escapeHtml(label)}</summary><pre>${escapeHtml(
    JSON.stringify(example, null, 2),
  )}</pre></details>`
}

function responseBlock(status: string, response: OpenApiResponse): string {
  const media = response.content ? Object.entries(response.content)[0] : undefined
  let body = ''
  if (media) {
    const [type, { schema }] = media
    const data = (schema.properties as Record<string, JsonSchema> | undefined)?.data
    if (data && schema.required) body = `<p><code>{"data": …}</code> holding ${typeText(data)}</p>`
    else if (Array.isArray(schema.allOf)) body = `<p>${typeText((schema.allOf as JsonSchema[])[0])}</p>`
    else body = type === 'application/json' ? schemaBlock(schema) : `<p>${escapeHtml(type)}</p>`
    // The success example only: the error bodies all look alike (ErrorBody).
    if (status.startsWith('2')) body += exampleBlock(media[1].example, 'Example response')
  }
  const cls = status.startsWith('2') ? 'ok' : status.startsWith('4') || status.startsWith('5') ? 'err' : ''
  return `<li><span class="status ${cls}">${escapeHtml(status)}</span> ${escapeHtml(response.description)}${body}</li>`
}

function operationBlock(method: HttpVerb, path: string, op: OpenApiOperation): string {
  const params = op.parameters?.length
    ? `<h4>Parameters</h4><table class="props"><tbody>${op.parameters
        .map(
          (p) =>
            `<tr><td><code>${escapeHtml(p.name)}</code> <span class="muted">${p.in}${p.required ? '' : ', optional'}</span></td><td>${typeText(p.schema)} ${constraints(p.schema)}${prose(p.description)}</td></tr>`,
        )
        .join('')}</tbody></table>`
    : ''
  const body = op.requestBody
    ? `<h4>Body${op.requestBody.required ? '' : ' <span class="muted">optional</span>'}</h4>${Object.entries(
        op.requestBody.content,
      )
        .map(
          ([type, media]) =>
            `<p class="muted">${escapeHtml(type)}</p>${schemaBlock(media.schema)}${exampleBlock(media.example, 'Example request')}`,
        )
        .join('')}`
    : ''
  const responses = `<h4>Responses</h4><ul class="responses">${Object.entries(op.responses)
    .map(([status, r]) => responseBlock(status, r))
    .join('')}</ul>`
  return `<section class="op" id="${anchor('op', op.operationId)}">
<h3><span class="verb ${method}">${method.toUpperCase()}</span> <code>${escapeHtml(path)}</code></h3>
<p class="summary">${escapeHtml(op.summary)} <span class="muted">(${escapeHtml(op.operationId)})</span></p>
${prose(op.description)}${params}${body}${responses}</section>`
}

const STYLE = `
body{font:15px/1.5 system-ui,sans-serif;margin:0;color:#1d2433;display:flex}
nav{width:300px;flex:none;height:100vh;overflow:auto;position:sticky;top:0;background:#f5f7fa;border-right:1px solid #dde3ea;padding:16px;box-sizing:border-box;font-size:13px}
nav a{color:#1d2433;text-decoration:none;display:block;padding:1px 0}nav h2{font-size:13px;text-transform:uppercase;margin:16px 0 4px;color:#5b6677}
main{padding:24px 40px;max-width:980px;min-width:0}
code{font:13px ui-monospace,monospace;background:#f0f2f5;padding:1px 4px;border-radius:3px}
.op{border-top:1px solid #dde3ea;padding:12px 0 20px}.op h3{margin:8px 0;font-size:17px}
.verb{display:inline-block;min-width:58px;text-align:center;color:#fff;border-radius:4px;font-size:12px;padding:2px 6px}
.get{background:#2f7d4f}.post{background:#2b62c4}.patch{background:#a86b00}.delete{background:#b3261e}
nav .verb{min-width:44px;font-size:10px;padding:0 4px;margin-right:4px}
.muted{color:#5b6677;font-size:13px}.summary{font-weight:600;margin:4px 0}
table.props{border-collapse:collapse;width:100%;margin:4px 0}table.props td{border-top:1px solid #e6eaef;padding:4px 8px;vertical-align:top}
table.props td:first-child{width:28%;white-space:nowrap}table.props p{margin:2px 0}
ul.responses{list-style:none;padding:0}ul.responses li{margin:4px 0}ul.responses p{margin:2px 0 2px 52px}
.status{display:inline-block;min-width:44px;font-weight:600}.status.ok{color:#2f7d4f}.status.err{color:#b3261e}
h4{margin:12px 0 4px;font-size:14px}
details.example{margin:4px 0 4px 52px}details.example summary{cursor:pointer;color:#2b62c4;font-size:13px}
pre{font:12px ui-monospace,monospace;background:#f5f7fa;border:1px solid #e6eaef;padding:8px;overflow:auto}
`

/** The whole page. */
export function renderReferencePage(doc: OpenApiDocument, documentUrl = '/api/v1/openapi.json'): string {
  const byTag = new Map<string, { method: HttpVerb; path: string; op: OpenApiOperation }[]>()
  for (const [path, item] of Object.entries(doc.paths)) {
    for (const method of VERBS) {
      const op = item[method]
      if (!op) continue
      const tag = op.tags[0] ?? 'other'
      byTag.set(tag, [...(byTag.get(tag) ?? []), { method, path, op }])
    }
  }
  const tags = doc.tags.filter((t) => byTag.has(t.name))
  const nav = tags
    .map(
      (t) =>
        `<h2><a href="#${anchor('tag', t.name)}">${escapeHtml(t.name)}</a></h2>${(byTag.get(t.name) ?? [])
          .map(
            ({ method, path, op }) =>
              `<a href="#${anchor('op', op.operationId)}"><span class="verb ${method}">${method.toUpperCase()}</span>${escapeHtml(path.replace('/api/v1', ''))}</a>`,
          )
          .join('')}`,
    )
    .join('')
  const sections = tags
    .map(
      (t) =>
        `<h2 id="${anchor('tag', t.name)}">${escapeHtml(t.name)}</h2>${prose(t.description)}${(
          byTag.get(t.name) ?? []
        )
          .map(({ method, path, op }) => operationBlock(method, path, op))
          .join('')}`,
    )
    .join('')
  const hooks = Object.entries(doc.webhooks)
    .map(
      ([name, { post }]) =>
        `<section class="op" id="${anchor('op', post.operationId)}"><h3><span class="verb post">POST</span> <code>${escapeHtml(name)}</code> to your endpoint</h3><p class="summary">${escapeHtml(post.summary)}</p>${prose(post.description)}<h4>Headers</h4><table class="props"><tbody>${(
          post.parameters ?? []
        )
          .map((p) => `<tr><td><code>${escapeHtml(p.name)}</code></td><td>${prose(p.description)}</td></tr>`)
          .join('')}</tbody></table><h4>Body</h4>${Object.values(post.requestBody?.content ?? {})
          .map((m) => schemaBlock(m.schema))
          .join('')}</section>`,
    )
    .join('')
  const schemas = Object.entries(doc.components.schemas)
    .map(
      ([name, schema]) =>
        `<section class="op" id="${anchor('schema', name)}"><h3>${escapeHtml(name)}</h3>${
          schema.type === 'object' && schema.properties
            ? propertiesTable(schema)
            : `<p>${typeText(schema)}</p>`
        }</section>`,
    )
    .join('')
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${escapeHtml(doc.info.title)} ${escapeHtml(doc.info.version)}</title><style>${STYLE}</style></head>
<body><nav><strong>${escapeHtml(doc.info.title)}</strong><div class="muted">version ${escapeHtml(doc.info.version)} · <a href="${escapeHtml(documentUrl)}" style="display:inline">openapi.json</a></div>${nav}<h2><a href="#webhooks">events</a></h2><h2><a href="#schemas">schemas</a></h2></nav>
<main><h1>${escapeHtml(doc.info.title)}</h1><p class="muted">OpenAPI ${escapeHtml(doc.openapi)} · <a href="${escapeHtml(documentUrl)}">${escapeHtml(documentUrl)}</a></p>${prose(doc.info.description)}
${sections}<h2 id="webhooks">Events sent to your webhooks</h2>${hooks}<h2 id="schemas">Schemas</h2>${schemas}</main></body></html>`
}
