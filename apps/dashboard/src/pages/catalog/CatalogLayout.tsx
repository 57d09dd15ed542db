import '../part2.css'
import { Link } from 'react-router'
import { useSession } from '../../session.ts'
import { TopFrame } from '../../ui.tsx'

/**
 * The public catalog's frame: it works signed out (no session needed), and offers the way
 * back to the workspace when there is one.
 */
export function CatalogLayout() {
  const state = useSession()
  return (
    <TopFrame home="/catalog" brand="Prompt catalog" className="catalog-topbar">
      <div className="topbar-right">
        {state.status === 'signed-in' ? (
          <Link to="/prompts" className="btn btn-small">
            Your prompts
          </Link>
        ) : state.status === 'signed-out' ? (
          <Link to="/sign-in?next=%2Fcatalog" className="btn btn-small btn-primary">
            Sign in
          </Link>
        ) : null}
      </div>
    </TopFrame>
  )
}
