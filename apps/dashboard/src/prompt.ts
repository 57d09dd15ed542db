import type { Prompt } from '@pm/contracts'
import { useQuery } from '@tanstack/react-query'
import { useOutletContext } from 'react-router'
import { client, useSignedIn } from './session.ts'

/** Query keys of one prompt's data, so writes can refresh exactly what they changed. */
export const keys = {
  prompt: (org: string | null, id: string) => ['prompt', org, id] as const,
  versions: (org: string | null, id: string) => ['versions', org, id] as const,
  environments: (org: string | null, id: string) => ['environments', org, id] as const,
}

export function usePromptQuery(id: string, enabled = true) {
  const { organizationId } = useSignedIn()
  return useQuery({
    queryKey: keys.prompt(organizationId, id),
    queryFn: () => client.api.getPrompt({ params: { id } }),
    enabled,
  })
}

export function useVersions(id: string) {
  const { organizationId } = useSignedIn()
  return useQuery({
    queryKey: keys.versions(organizationId, id),
    queryFn: async () => {
      const { versions } = await client.api.listVersions({ params: { id } })
      return [...versions].sort((a, b) => b.version - a.version)
    },
  })
}

/** The prompt the layout loaded, for the tab pages under it. */
export function usePrompt(): Prompt {
  return useOutletContext<{ prompt: Prompt }>().prompt
}

export { parseTags } from './lib.ts'
