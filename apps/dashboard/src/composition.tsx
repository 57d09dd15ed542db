import { useQuery } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link } from 'react-router'
import { client, useSignedIn } from './session.ts'

/**
 * Composition in the editor (DESIGN section 12): "Insert reference" with a slug search, a link
 * for each reference of the template, and "Used by" on a prompt that others include.
 */

/** `{{> slug}}`, `{{> slug@production}}`, `{{> slug@v3}}` as packages/template reads them. */
const REFERENCE = /\{\{\s*>\s*([a-z0-9]+(?:-[a-z0-9]+)*)(?:@(preview|production|v[1-9][0-9]*))?\s*\}\}/g

export function referencedSlugs(template: string): string[] {
  const slugs: string[] = []
  for (const m of template.matchAll(REFERENCE)) if (m[1] && !slugs.includes(m[1])) slugs.push(m[1])
  return slugs
}

/** A button that opens a slug search; choosing a prompt inserts `{{> slug}}`. */
export function InsertReference({ selfId, onInsert }: { selfId: string; onInsert: (text: string) => void }) {
  const { organizationId } = useSignedIn()
  const [open, setOpen] = useState(false)
  const [search, setSearch] = useState('')
  const id = useId()
  const query = useQuery({
    queryKey: ['prompts', organizationId, 'reference-search', search],
    queryFn: () => client.api.listPrompts({ query: { page: 1, limit: 8, ...(search ? { search } : {}) } }),
    enabled: open && organizationId !== null,
  })
  const candidates = (query.data?.prompts ?? []).filter((p) => p._id !== selfId && p.type !== 'chat')
  return (
    <div className="reference-insert">
      <button type="button" className="btn btn-small" aria-expanded={open} onClick={() => setOpen(!open)}>
        Insert reference
      </button>
      {open && (
        <div className="reference-search">
          <label htmlFor={id}>Find a prompt by name or slug</label>
          <input id={id} type="search" value={search} onChange={(e) => setSearch(e.target.value)} />
          <ul aria-label="Prompts to include">
            {candidates.map((p) => (
              <li key={p._id}>
                <button
                  type="button"
                  className="btn btn-small reference-choice"
                  onClick={() => {
                    onInsert(`{{> ${p.slug}}}`)
                    setOpen(false)
                  }}
                >
                  <span className="mono">{p.slug}</span> <span className="muted small">{p.name}</span>
                </button>
              </li>
            ))}
            {query.isSuccess && candidates.length === 0 && <li className="muted">No text prompt found.</li>}
          </ul>
        </div>
      )}
    </div>
  )
}

/** One link per prompt the template includes (to its editor; a missing slug is said so). */
export function ReferenceLinks({ template }: { template: string }) {
  const slugs = referencedSlugs(template)
  if (slugs.length === 0) return null
  return (
    <p className="small references">
      Includes:{' '}
      {slugs.map((slug, i) => (
        <span key={slug}>
          {i > 0 && ', '}
          <ReferenceLink slug={slug} />
        </span>
      ))}
    </p>
  )
}

function ReferenceLink({ slug }: { slug: string }) {
  const { organizationId } = useSignedIn()
  const query = useQuery({
    queryKey: ['prompts', organizationId, 'by-slug', slug],
    queryFn: () => client.api.getPromptBySlug({ params: { slug } }),
    retry: false,
  })
  if (query.data) {
    return (
      <Link to={`/prompts/${query.data._id}`} className="mono">
        {slug}
      </Link>
    )
  }
  return (
    <span className="mono">
      {slug}
      {query.isError ? ' (not found)' : ''}
    </span>
  )
}

/** The prompts that include this one. */
export function UsedBy({ promptId }: { promptId: string }) {
  const { organizationId } = useSignedIn()
  const query = useQuery({
    queryKey: ['prompts', organizationId, 'dependents', promptId],
    queryFn: () => client.api.listPromptDependents({ params: { id: promptId } }),
  })
  const dependents = query.data?.dependents ?? []
  if (dependents.length === 0) return null
  return (
    <section aria-labelledby="used-by-title" className="used-by">
      <h2 id="used-by-title">Used by</h2>
      <ul>
        {dependents.map((d) => (
          <li key={d.promptId}>
            <Link to={`/prompts/${d.promptId}`}>{d.name}</Link> <span className="mono small">{d.slug}</span>{' '}
            <span className="muted small">({d.in.join(' and ')})</span>
          </li>
        ))}
      </ul>
    </section>
  )
}
