import { useRef } from 'react'

export interface Mutation {
  mutate: (variables: undefined, options: { onSettled: () => void }) => void
}

/** Calls `mutation.mutate()` unless `busy` says a call has not settled yet. */
export function mutateOnce(busy: { current: boolean }, mutation: Mutation): void {
  if (busy.current) return
  busy.current = true
  mutation.mutate(undefined, {
    onSettled: () => {
      busy.current = false
    },
  })
}

/**
 * `mutation.mutate()` guarded synchronously: a second call before the first settles does
 * nothing. The button's `disabled={mutation.isPending}` applies a render later, so a double
 * click in one frame (or Enter pressed twice) would otherwise create two.
 */
export function useMutateOnce(mutation: Mutation): () => void {
  const busy = useRef(false)
  return () => mutateOnce(busy, mutation)
}
