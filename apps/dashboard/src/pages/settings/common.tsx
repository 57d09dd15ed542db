import '../part2.css'
import type { Role } from '@pm/contracts'
import { useQuery } from '@tanstack/react-query'
import { type ReactNode, useId, useState } from 'react'
import { useNavigate } from 'react-router'
import { client, organizationKey, session, useSignedIn } from '../../session.ts'

/** Query keys of the settings pages. */
export const settingsKeys = {
  members: (org: string | null) => ['members', org] as const,
  organization: organizationKey,
  auditLog: (org: string | null) => ['audit-log', org] as const,
  apiKeys: (org: string | null) => ['api-keys', org] as const,
  webhooks: (org: string | null) => ['webhooks', org] as const,
  webhook: (org: string | null, id: string) => ['webhook', org, id] as const,
  deliveries: (org: string | null, id: string) => ['deliveries', org, id] as const,
}

export function useMembers() {
  const { organizationId } = useSignedIn()
  return useQuery({
    queryKey: settingsKeys.members(organizationId),
    queryFn: () => client.api.listMembers({ params: { id: organizationId ?? '' } }),
    enabled: organizationId !== null,
  })
}

/** The signed-in user's role in the current organization (from its members list). */
export function useMyRole(): { role: Role | undefined; pending: boolean; error: unknown } {
  const { user } = useSignedIn()
  const members = useMembers()
  const me = members.data?.members.find((m) => m.userId === user._id)
  return { role: me?.role, pending: members.isPending, error: members.error }
}

export const isManager = (role: Role | undefined): boolean => role === 'OWNER' || role === 'ADMIN'

/**
 * The organization's API keys by id, as `name (prefix…)`, for naming who did something. Only an
 * OWNER/ADMIN may list keys: for anyone else (`enabled` false) the map stays empty, no request made.
 */
export function useApiKeyNames(enabled = true): Map<string, string> {
  const { organizationId } = useSignedIn()
  const keys = useQuery({
    queryKey: settingsKeys.apiKeys(organizationId),
    queryFn: () => client.api.listApiKeys({ params: { id: organizationId ?? '' } }),
    enabled: enabled && organizationId !== null,
  })
  return new Map((keys.data?.apiKeys ?? []).map((k) => [k._id, `${k.name} (${k.prefix}…)`]))
}

/** Why a page is closed to the caller (a MEMBER, say), instead of a bare 403. */
export function NotAllowed({ what, role }: { what: string; role: Role | undefined }) {
  return (
    <div className="banner banner-warn" role="note">
      <strong>Only an ADMIN or OWNER of this organization can {what}.</strong>{' '}
      {role ? `Your role here is ${role}.` : 'You have no role here.'} Ask an OWNER to change your role if you
      need this.
    </div>
  )
}

/**
 * A secret the service answers once (an API key, a webhook signing secret): shown with a copy
 * button and a plain warning that it will not be shown again.
 */
export function SecretOnce({
  label,
  value,
  kept = 'The service keeps only a hash of it.',
  children,
  onDone,
}: {
  label: string
  value: string
  /** How the service keeps it (an API key: a hash; a webhook's signing secret: encrypted). */
  kept?: string
  children?: ReactNode
  onDone: () => void
}) {
  const id = useId()
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null)
  return (
    <section className="panel secret" aria-labelledby={`${id}-title`}>
      <h2 id={`${id}-title`}>{label}</h2>
      <p className="secret-warning">
        <strong>Copy it now: you will not see it again.</strong> {kept}
      </p>
      {children}
      <div className="secret-row">
        <label htmlFor={id} className="sr-only">
          {label}
        </label>
        <input
          id={id}
          className="mono secret-value"
          readOnly
          value={value}
          onFocus={(e) => e.currentTarget.select()}
        />
        <button
          type="button"
          className="btn btn-primary"
          onClick={() => {
            navigator.clipboard.writeText(value).then(
              () => setCopied('yes'),
              () => setCopied('no'),
            )
          }}
        >
          Copy
        </button>
      </div>
      <p role="status" className="small muted">
        {copied === 'yes' && 'Copied to the clipboard.'}
        {copied === 'no' && 'The browser refused the clipboard: select the text and copy it yourself.'}
      </p>
      <button type="button" className="btn" onClick={onDone}>
        I have copied it
      </button>
    </section>
  )
}

/** Switches to an organization (new access token) and opens a path there. */
export function useOpenIn(): (organizationId: string, path: string) => Promise<void> {
  const navigate = useNavigate()
  return async (organizationId, path) => {
    const state = session.getState()
    if (state.status === 'signed-in' && state.organizationId !== organizationId) {
      // Off the current prompt first (its page goes back to the list when the workspace
      // changes), and only then switch: the data router's navigation completes asynchronously.
      await navigate('/prompts')
      await session.switchOrganization(organizationId)
    }
    navigate(path)
  }
}
