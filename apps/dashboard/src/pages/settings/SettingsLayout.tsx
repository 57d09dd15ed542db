import { NavLink, Outlet } from 'react-router'
import { useSignedIn } from '../../session.ts'
import { Empty } from '../../ui.tsx'
import { Organization } from './Organization.tsx'

/** The organization's settings: its name, members, API keys, webhooks, connections and audit log, as tabs. */
export function SettingsLayout() {
  const { organizationId } = useSignedIn()
  return (
    <>
      <div className="page-head">
        <h1>Settings</h1>
      </div>
      {organizationId === null ? (
        <>
          <Empty title="No organization yet">
            <p>You are not a member of any organization. Create one below, or ask to be added.</p>
          </Empty>
          <Organization />
        </>
      ) : (
        <>
          <nav className="tabs settings-tabs" aria-label="Settings">
            <NavLink to="/settings" end>
              Organization
            </NavLink>
            <NavLink to="/settings/members">Members</NavLink>
            <NavLink to="/settings/api-keys">API keys</NavLink>
            <NavLink to="/settings/webhooks">Webhooks</NavLink>
            <NavLink to="/settings/connections">Connections</NavLink>
            <NavLink to="/settings/audit-log">Audit log</NavLink>
          </nav>
          <Outlet />
        </>
      )}
    </>
  )
}
