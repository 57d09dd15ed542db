import { keepPreviousData, useQuery } from '@tanstack/react-query'
import { useEffect, useState } from 'react'
import { Link, useSearchParams } from 'react-router'
import { client } from '../../session.ts'
import { Empty, ErrorBanner, Field, Loading, Pager, promptCount, TagList, When } from '../../ui.tsx'

const PAGE_SIZE = 12

/** Published prompts anyone may read and render: search and pages, no sign-in needed. */
export function Catalog() {
  const [params, setParams] = useSearchParams()
  const search = params.get('search') ?? ''
  const page = Math.max(1, Number.parseInt(params.get('page') ?? '1', 10) || 1)
  const [input, setInput] = useState(search)
  useEffect(() => {
    const timer = setTimeout(() => {
      if (input !== search) setParams(input ? { search: input } : {}, { replace: true })
    }, 300)
    return () => clearTimeout(timer)
  })
  const goTo = (n: number) => {
    const next = new URLSearchParams(params)
    if (n > 1) next.set('page', String(n))
    else next.delete('page')
    setParams(next)
  }
  const query = useQuery({
    queryKey: ['catalog', { search, page }],
    queryFn: () =>
      client.api.listPublicPrompts({ query: { page, limit: PAGE_SIZE, ...(search ? { search } : {}) } }),
    placeholderData: keepPreviousData,
  })
  const data = query.data
  return (
    <>
      <div className="page-head">
        <div>
          <h1>Public catalog</h1>
          <p className="muted small">
            Prompts their authors published for everyone: read them, try them, fork them.
          </p>
        </div>
      </div>
      <search>
        <form className="catalog-search" onSubmit={(e) => e.preventDefault()}>
          <Field
            label="Search the catalog"
            id="catalog-search"
            type="search"
            placeholder="Name, description or template"
            value={input}
            onChange={(e) => setInput(e.target.value)}
          />
        </form>
      </search>
      <ErrorBanner error={query.error} />
      {query.isPending && <Loading label="Loading the catalog" />}
      {data && data.prompts.length === 0 && (
        <Empty title={search ? 'Nothing matches' : 'The catalog is empty'}>
          <p>{search ? 'Try other words.' : 'No prompt has been made public yet.'}</p>
        </Empty>
      )}
      {data && data.prompts.length > 0 && (
        <>
          <ul className="catalog-grid" aria-busy={query.isFetching}>
            {data.prompts.map((p) => (
              <li key={p._id} className="card">
                <Link to={`/catalog/${p._id}`} className="prompt-name">
                  {p.name}
                </Link>
                <p className="small muted">
                  Version {p.version} · published <When at={p.publishedAt} />
                </p>
                {p.description && <p className="prompt-desc">{p.description}</p>}
                {p.tags.length > 0 && <TagList label="Tags" tags={p.tags} />}
              </li>
            ))}
          </ul>
          <Pager
            page={page}
            pagination={data.pagination}
            onPage={goTo}
            count={promptCount(data.pagination.total)}
          />
        </>
      )}
    </>
  )
}
