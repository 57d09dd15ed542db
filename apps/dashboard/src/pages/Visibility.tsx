import './part2.css'
import type { Prompt } from '@pm/contracts'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { Link } from 'react-router'
import { keys } from '../prompt.ts'
import { client, useSignedIn } from '../session.ts'
import { ErrorBanner } from '../ui.tsx'

/**
 * Public visibility of a prompt: "Make public" puts its published content in the catalog
 * (the service refuses while nothing is published, and its message is shown); "Unpublish
 * from the catalog" takes it out again, keeping every version.
 */
export function Visibility({ prompt }: { prompt: Prompt }) {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const onSuccess = (updated: Prompt) => {
    const { _id } = updated
    queryClient.setQueryData(keys.prompt(organizationId, _id), updated)
    queryClient.invalidateQueries({ queryKey: ['prompts'] })
    queryClient.invalidateQueries({ queryKey: ['catalog'] })
  }
  const makePublic = useMutation({
    mutationFn: async (): Promise<Prompt> => {
      const { staleVariables: _, ...updated } = await client.api.updatePrompt({
        params: { id: prompt._id },
        body: { isPublic: true },
      })
      return updated
    },
    onSuccess,
  })
  const unpublish = useMutation({
    mutationFn: () => client.api.unpublishPrompt({ params: { id: prompt._id } }),
    onSuccess,
  })
  const busy = makePublic.isPending || unpublish.isPending
  return (
    <div className="visibility">
      {prompt.isPublic ? (
        <div className="actions">
          <Link to={`/catalog/${prompt._id}`} className="btn btn-small">
            View in the catalog
          </Link>
          <button
            type="button"
            className="btn btn-small"
            disabled={busy}
            onClick={() => {
              makePublic.reset()
              unpublish.mutate()
            }}
          >
            Unpublish from the catalog
          </button>
        </div>
      ) : (
        <button
          type="button"
          className="btn btn-small"
          disabled={busy}
          onClick={() => {
            unpublish.reset()
            makePublic.mutate()
          }}
        >
          Make public
        </button>
      )}
      <ErrorBanner error={makePublic.error} title="Not made public" />
      <ErrorBanner error={unpublish.error} title="Not unpublished" />
    </div>
  )
}
