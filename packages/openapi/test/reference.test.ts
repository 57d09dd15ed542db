import { listRoutes } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { buildOpenApiDocument, escapeHtml, renderReferencePage } from '../src/index.ts'

describe('the reference page', () => {
  const doc = buildOpenApiDocument()
  const html = renderReferencePage(doc)

  it('has a section and a navigation link for every operation', () => {
    for (const route of listRoutes()) {
      expect(html, route.operationId).toContain(`id="op-${route.operationId}"`)
      expect(html, route.operationId).toContain(`href="#op-${route.operationId}"`)
    }
  })

  it('has a section for every schema, and every internal link lands on an anchor', () => {
    for (const name of Object.keys(doc.components.schemas)) expect(html).toContain(`id="schema-${name}"`)
    const ids = new Set([...html.matchAll(/ id="([^"]+)"/g)].map((m) => m[1]))
    const links = [...html.matchAll(/href="#([^"]+)"/g)].map((m) => m[1])
    expect(links.length).toBeGreaterThan(100)
    for (const link of links) expect(ids.has(link), link).toBe(true)
  })

  it('shows an example request and response for an operation', () => {
    const start = html.indexOf('id="op-invokePrompt"')
    const section = html.slice(start, html.indexOf('</section>', start))
    expect(section).toContain('Example request')
    expect(section).toContain('Example response')
    expect(section).toContain(escapeHtml('"renderedContent": "Hello Ada, welcome to London!"'))
  })

  it('is self-contained: no script and nothing loaded from elsewhere', () => {
    expect(html).not.toMatch(/<script/i)
    expect(html).not.toMatch(/(src|href)="https?:/i)
  })

  it('escapes text', () => {
    expect(escapeHtml(`<a href="x">'&'</a>`)).toBe('&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;')
    const page = renderReferencePage({ ...doc, info: { ...doc.info, title: '<b>x</b>' } })
    expect(page).toContain('&lt;b&gt;x&lt;/b&gt;')
    expect(page).not.toContain('<b>x</b>')
  })
})
