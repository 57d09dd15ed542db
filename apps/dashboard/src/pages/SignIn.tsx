import { PromptServiceError } from '@pm/client'
import { type FormEvent, useState } from 'react'
import { Link, Navigate, useNavigate, useSearchParams } from 'react-router'
import { session, useSession } from '../session.ts'
import { ErrorBanner, Loading } from '../ui.tsx'

/** Only paths of this app: `next` never sends the browser elsewhere. */
function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') ? next : '/prompts'
}

function AuthFrame({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <main className="auth">
      <div className="auth-card">
        <p className="brand auth-brand">
          <span aria-hidden="true" className="brand-mark">
            {'{{ }}'}
          </span>
          <span className="brand-name">Prompt service</span>
        </p>
        <h1>{title}</h1>
        {children}
      </div>
    </main>
  )
}

export function SignIn() {
  const state = useSession()
  const [params] = useSearchParams()
  const navigate = useNavigate()
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const next = safeNext(params.get('next'))

  if (state.status === 'loading') {
    return (
      <AuthFrame title="Sign in">
        <Loading label="Checking your session" />
      </AuthFrame>
    )
  }
  if (state.status === 'signed-in' && !busy) return <Navigate to={next} replace />

  const submit = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    session.signIn(email, password).then(
      () => navigate(next, { replace: true }),
      (err: unknown) => {
        setError(err)
        setBusy(false)
      },
    )
  }
  return (
    <AuthFrame title="Sign in">
      <form onSubmit={submit} className="form">
        <ErrorBanner error={error} />
        <div className="field">
          <label htmlFor="email">Email</label>
          <input
            id="email"
            type="email"
            autoComplete="username"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="password">Password</label>
          <input
            id="password"
            type="password"
            autoComplete="current-password"
            required
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
        </div>
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Signing in…' : 'Sign in'}
        </button>
      </form>
      <p className="muted small">
        No account? <Link to="/sign-up">Sign up</Link> (when this server allows sign-up).
      </p>
    </AuthFrame>
  )
}

export function SignUp() {
  const state = useSession()
  const navigate = useNavigate()
  const [name, setName] = useState('')
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  if (state.status === 'signed-in' && !busy) return <Navigate to="/prompts" replace />
  // Without AUTH_ALLOW_SIGNUP the register route does not exist: say so plainly.
  const disabled = error instanceof PromptServiceError && error.status === 404

  const submit = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    session.signUp({ name, email, password }).then(
      () => navigate('/prompts', { replace: true }),
      (err: unknown) => {
        setError(err)
        setBusy(false)
      },
    )
  }
  return (
    <AuthFrame title="Create an account">
      {disabled ? (
        <div className="banner banner-error" role="alert">
          Sign-up is turned off on this server (it needs <code>AUTH_ALLOW_SIGNUP=true</code>). Ask an
          administrator to add you to an organization.
        </div>
      ) : (
        <ErrorBanner error={error} />
      )}
      <form onSubmit={submit} className="form">
        <div className="field">
          <label htmlFor="name">Name</label>
          <input
            id="name"
            autoComplete="name"
            required
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="email">Email</label>
          <input
            id="email"
            type="email"
            autoComplete="email"
            required
            value={email}
            onChange={(e) => setEmail(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor="password">Password</label>
          <input
            id="password"
            type="password"
            autoComplete="new-password"
            required
            minLength={8}
            aria-describedby="password-hint"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
          />
          <span id="password-hint" className="hint">
            At least 8 characters.
          </span>
        </div>
        <button type="submit" className="btn btn-primary btn-block" disabled={busy}>
          {busy ? 'Creating…' : 'Sign up'}
        </button>
      </form>
      <p className="muted small">
        Have an account? <Link to="/sign-in">Sign in</Link>
      </p>
    </AuthFrame>
  )
}
