import type { Role } from '@pm/contracts'
import { useQuery } from '@tanstack/react-query'
import { client, useSignedIn } from './session.ts'

/**
 * People by name (DESIGN section 17): the names of the organization's members come from the
 * identity service's members list (GET /organizations/:id/members, readable by every member,
 * and holding members of this organization only). The query key is the settings pages' own
 * (`['members', org]`), so the list is fetched once for both. The same list gives the
 * signed-in user's role here.
 */
export function usePeople(): { nameOf: (userId: string) => string; role: Role | undefined } {
  const { organizationId, user } = useSignedIn()
  const members = useQuery({
    queryKey: ['members', organizationId] as const,
    queryFn: () => client.api.listMembers({ params: { id: organizationId ?? '' } }),
    enabled: organizationId !== null,
  })
  const byId = new Map((members.data?.members ?? []).map((m) => [m.userId, m]))
  return {
    role: byId.get(user._id)?.role,
    nameOf: (userId: string) => {
      if (userId === user._id) return 'you'
      const member = byId.get(userId)
      if (member) return member.name || member.email
      // Not (or no longer) a member: the identity service tells nothing about people outside
      // the organization, and an id means nothing to a reader.
      return members.isPending ? '…' : 'a former member'
    },
  }
}
