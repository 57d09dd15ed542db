import type { ListPromptsQuery } from '@pm/contracts'
import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { useEffect, useRef, useState } from 'react'
import { Link, useSearchParams } from 'react-router'
import { client, useSignedIn } from '../session.ts'
import { Empty, ErrorBanner, Field, Loading, Pager, promptCount, TagList, When } from '../ui.tsx'

type Visibility = NonNullable<ListPromptsQuery['visibility']>
const VISIBILITIES: Visibility[] = ['all', 'public', 'private']
const PAGE_SIZE = 20

/** The workspace's prompts: search, tag and visibility filters, pages, the summary counts. */
export function PromptList() {
  const { organizationId } = useSignedIn()
  const [params, setParams] = useSearchParams()
  const search = params.get('search') ?? ''
  const tags = params.get('tags') ?? ''
  const visibilityParam = params.get('visibility')
  const visibility: Visibility = VISIBILITIES.includes(visibilityParam as Visibility)
    ? (visibilityParam as Visibility)
    : 'all'
  const page = Math.max(1, Number.parseInt(params.get('page') ?? '1', 10) || 1)

  // The search box updates the URL a moment after typing stops. Every other change (visibility,
  // page) cancels that pending update and carries the typed words itself: a pending one firing
  // after it, with the URL of the render before, would undo it.
  const [searchInput, setSearchInput] = useState(search)
  const [tagsInput, setTagsInput] = useState(tags)
  const pending = useRef<ReturnType<typeof setTimeout>>(undefined)
  useEffect(() => {
    if (searchInput === search && tagsInput === tags) return
    pending.current = setTimeout(() => update({ page: '' }), 300)
    return () => clearTimeout(pending.current)
  })

  function update(changes: Record<string, string>) {
    clearTimeout(pending.current)
    const next = new URLSearchParams(params)
    for (const [key, value] of Object.entries({ search: searchInput, tags: tagsInput, ...changes })) {
      if (value && !(key === 'visibility' && value === 'all') && !(key === 'page' && value === '1'))
        next.set(key, value)
      else next.delete(key)
    }
    setParams(next, { replace: true })
  }

  const query = useQuery({
    queryKey: ['prompts', organizationId, { search, tags, visibility, page }],
    queryFn: () =>
      client.api.listPrompts({
        query: {
          page,
          limit: PAGE_SIZE,
          ...(search ? { search } : {}),
          ...(tags ? { tags } : {}),
          visibility,
        },
      }),
    placeholderData: keepPreviousData,
    enabled: organizationId !== null,
  })

  if (organizationId === null) {
    return (
      <Empty title="No organization yet">
        <p>You are not a member of any organization. Ask an administrator to add you.</p>
      </Empty>
    )
  }

  const data = query.data
  const filtered = search !== '' || tags !== '' || visibility !== 'all'
  return (
    <>
      <div className="page-head">
        <h1>Prompts</h1>
        <div className="actions">
          <Link to="/prompts/import" className="btn">
            Import
          </Link>
          <Link to="/prompts/new" className="btn btn-primary">
            Create prompt
          </Link>
        </div>
      </div>
      {data && (
        <ul className="summary" aria-label="Organization summary">
          <li>
            <strong>{data.summary.total}</strong> total
          </li>
          <li>
            <strong>{data.summary.published}</strong> published
          </li>
          <li>
            <strong>{data.summary.unpublished}</strong> drafts only
          </li>
          <li>
            <strong>{data.summary.public}</strong> public
          </li>
          <li>
            <strong>{data.summary.private}</strong> private
          </li>
        </ul>
      )}
      <search>
        <form className="filters" onSubmit={(e) => e.preventDefault()}>
          <Field
            label="Search"
            id="search"
            type="search"
            placeholder="Name, description or template"
            value={searchInput}
            onChange={(e) => setSearchInput(e.target.value)}
          />
          <Field
            label="Tags"
            id="tags"
            placeholder="support, email"
            value={tagsInput}
            onChange={(e) => setTagsInput(e.target.value)}
          />
          <div className="field">
            <label htmlFor="visibility">Visibility</label>
            <select
              id="visibility"
              value={visibility}
              onChange={(e) => update({ visibility: e.target.value, page: '' })}
            >
              <option value="all">All</option>
              <option value="public">Public</option>
              <option value="private">Private</option>
            </select>
          </div>
        </form>
      </search>
      <ErrorBanner error={query.error} />
      {query.isPending && <Loading label="Loading prompts" />}
      {data && data.prompts.length === 0 && (
        <Empty title={filtered ? 'No prompt matches' : 'No prompts yet'}>
          {filtered ? (
            <p>Try other words or clear the filters.</p>
          ) : (
            <>
              <p>Create your first prompt template; publish it when it is ready.</p>
              <Link to="/prompts/new" className="btn btn-primary">
                Create prompt
              </Link>
            </>
          )}
        </Empty>
      )}
      {data && data.prompts.length > 0 && (
        <>
          <ul className="prompt-list" aria-busy={query.isFetching}>
            {data.prompts.map((p) => (
              <li key={p._id} className="prompt-row">
                <div className="prompt-main">
                  <Link to={`/prompts/${p._id}`} className="prompt-name">
                    {p.name}
                  </Link>
                  <span className="muted small mono">{p.slug}</span>
                  {p.description && <p className="prompt-desc">{p.description}</p>}
                  {p.tags.length > 0 && <TagList label={`Tags of ${p.name}`} tags={p.tags} />}
                </div>
                <div className="prompt-meta small">
                  <span className={`badge ${p.versionCount > 0 ? 'badge-ok' : ''}`}>
                    {p.versionCount > 0 ? `v${p.versionCount}` : 'Draft'}
                  </span>
                  <span className="badge">{p.isPublic ? 'Public' : 'Private'}</span>
                  <span className="muted">
                    Updated <When at={p.updatedAt} />
                  </span>
                </div>
              </li>
            ))}
          </ul>
          <Pager
            page={page}
            pagination={data.pagination}
            onPage={(n) => update({ page: String(n) })}
            count={promptCount(data.pagination.total)}
            textClassName="pager-text"
          />
        </>
      )}
    </>
  )
}
