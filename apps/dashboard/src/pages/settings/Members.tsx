import { type Member, ROLES, type Role } from '@pm/contracts'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { client, useSignedIn } from '../../session.ts'
import { ActionsHeader, ConfirmDialog, Empty, ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { isManager, NotAllowed, settingsKeys, useMembers, useMyRole } from './common.tsx'

type Status = 'ACTIVE' | 'SUSPENDED'

/**
 * The organization's members with role and status. An ADMIN or OWNER adds an existing user by
 * email, changes roles and statuses and removes members; the service's rules (only an OWNER
 * touches OWNERs, an ACTIVE OWNER always remains) come back as its errors, shown here.
 */
export function Members() {
  const { organizationId, user } = useSignedIn()
  const queryClient = useQueryClient()
  const members = useMembers()
  const { role } = useMyRole()
  const manager = isManager(role)
  const [removing, setRemoving] = useState<Member | null>(null)
  const [rowError, setRowError] = useState<{ userId: string; error: unknown } | null>(null)
  const [notice, setNotice] = useState<string | null>(null)
  const refresh = () => queryClient.invalidateQueries({ queryKey: settingsKeys.members(organizationId) })

  const update = useMutation({
    mutationFn: (input: { member: Member; role?: Role; status?: Status }) =>
      client.api.updateMember({
        params: { id: organizationId ?? '', userId: input.member.userId },
        body: {
          ...(input.role ? { role: input.role } : {}),
          ...(input.status ? { status: input.status } : {}),
        },
      }),
    onMutate: () => {
      setRowError(null)
      setNotice(null)
    },
    onSuccess: (m) => {
      setNotice(`${m.name || m.email} is now ${m.role}, ${m.status}.`)
      refresh()
    },
    onError: (error, input) => {
      setRowError({ userId: input.member.userId, error })
      refresh()
    },
  })
  const remove = useMutation({
    mutationFn: (member: Member) =>
      client.api.removeMember({ params: { id: organizationId ?? '', userId: member.userId } }),
    onSuccess: (m) => {
      setRemoving(null)
      setNotice(`${m.name || m.email} was removed from the organization.`)
      refresh()
    },
  })

  if (members.isPending) return <Loading label="Loading the members" />
  if (members.error) return <ErrorBanner error={members.error} />
  const list = members.data.members
  return (
    <>
      {manager ? (
        <AddMember onAdded={setNotice} />
      ) : (
        <NotAllowed what="add, change or remove members" role={role} />
      )}
      {notice && (
        <p className="banner banner-ok" role="status">
          {notice}
        </p>
      )}
      <section aria-labelledby="members-title">
        <h2 id="members-title">Members ({list.length})</h2>
        {rowError && (
          <ErrorBanner
            error={rowError.error}
            title={`Not changed (${list.find((m) => m.userId === rowError.userId)?.name || 'member'})`}
          />
        )}
        {list.length === 0 ? (
          <Empty title="No members" />
        ) : (
          <table className="table rtable">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Email</th>
                <th scope="col">Role</th>
                <th scope="col">Status</th>
                <th scope="col">Member since</th>
                {manager && <ActionsHeader />}
              </tr>
            </thead>
            <tbody>
              {list.map((m) => {
                const who = m.name || m.email
                return (
                  <tr key={m.userId}>
                    <td data-label="Name">
                      {who}
                      {m.userId === user._id && <span className="badge">you</span>}
                    </td>
                    <td data-label="Email" className="wrap">
                      {m.email}
                    </td>
                    <td data-label="Role">
                      {manager ? (
                        <select
                          aria-label={`Role of ${who}`}
                          value={m.role}
                          disabled={update.isPending}
                          onChange={(e) => update.mutate({ member: m, role: e.target.value as Role })}
                        >
                          {ROLES.map((r) => (
                            <option key={r} value={r}>
                              {r}
                            </option>
                          ))}
                        </select>
                      ) : (
                        m.role
                      )}
                    </td>
                    <td data-label="Status">
                      {manager && m.status !== 'INVITED' ? (
                        <select
                          aria-label={`Status of ${who}`}
                          value={m.status}
                          disabled={update.isPending}
                          onChange={(e) => update.mutate({ member: m, status: e.target.value as Status })}
                        >
                          <option value="ACTIVE">ACTIVE</option>
                          <option value="SUSPENDED">SUSPENDED</option>
                        </select>
                      ) : (
                        <span className={`badge ${m.status === 'ACTIVE' ? 'badge-ok' : 'badge-warn'}`}>
                          {m.status}
                        </span>
                      )}
                    </td>
                    <td data-label="Member since">
                      <When at={m.createdAt} />
                    </td>
                    {manager && (
                      <td data-label="">
                        <button
                          type="button"
                          className="btn btn-small"
                          onClick={() => {
                            remove.reset()
                            setRemoving(m)
                          }}
                        >
                          Remove {who}
                        </button>
                      </td>
                    )}
                  </tr>
                )
              })}
            </tbody>
          </table>
        )}
      </section>
      <ConfirmDialog
        open={removing !== null}
        title={`Remove ${removing?.name || removing?.email || ''}?`}
        message={
          <p>
            Their membership ends now: they lose access to this organization's prompts. Their account and
            other organizations are untouched.
          </p>
        }
        error={remove.error}
        errorTitle="Not removed"
        confirmLabel="Remove member"
        busy={remove.isPending}
        onConfirm={() => removing && remove.mutate(removing)}
        onCancel={() => setRemoving(null)}
      />
    </>
  )
}

function AddMember({ onAdded }: { onAdded: (notice: string) => void }) {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const roleId = useId()
  const [email, setEmail] = useState('')
  const [role, setRole] = useState<Role>('MEMBER')
  const add = useMutation({
    mutationFn: () =>
      client.api.addMember({ params: { id: organizationId ?? '' }, body: { email: email.trim(), role } }),
    onSuccess: (m) => {
      setEmail('')
      setRole('MEMBER')
      onAdded(`${m.name || m.email} was added as ${m.role}.`)
      queryClient.invalidateQueries({ queryKey: settingsKeys.members(organizationId) })
    },
  })
  return (
    <section className="panel" aria-labelledby="add-member-title">
      <h2 id="add-member-title">Add a member</h2>
      <p className="hint">The person needs an account already; they become an ACTIVE member at once.</p>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault()
          add.mutate()
        }}
      >
        <Field
          label="Email"
          fieldClass="grow"
          type="email"
          required
          maxLength={254}
          value={email}
          onChange={(e) => setEmail(e.target.value)}
        />
        <div className="field">
          <label htmlFor={roleId}>Role</label>
          <select id={roleId} value={role} onChange={(e) => setRole(e.target.value as Role)}>
            {ROLES.map((r) => (
              <option key={r} value={r}>
                {r}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="btn btn-primary" disabled={add.isPending}>
          Add member
        </button>
      </form>
      <ErrorBanner error={add.error} title="Not added" />
    </section>
  )
}
