import { PromptServiceError } from '@pm/client'
import { type FormEvent, useState } from 'react'
import { Link, Navigate, useNavigate, useSearchParams } from 'react-router'
import { session, useSession } from '../session.ts'
import { Brand, ErrorBanner, Field, Loading } from '../ui.tsx'

/** Only paths of this app: `next` never sends the browser elsewhere. */
function safeNext(next: string | null): string {
  return next?.startsWith('/') && !next.startsWith('//') ? next : '/prompts'
}

function AuthFrame({ title, children }: { title: string; children: React.ReactNode }) {
  return (
    <main className="auth">
      <div className="auth-card">
        <p className="brand auth-brand">
          <Brand name="Prompt service" />
        </p>
        <h1>{title}</h1>
        {children}
      </div>
    </main>
  )
}

/**
 * The email and password fields of both forms. For a new account the browser is told to offer
 * a new password (and the service's minimum is stated), otherwise the saved one.
 */
function Credentials({
  newAccount = false,
  email,
  onEmail,
  password,
  onPassword,
}: {
  newAccount?: boolean
  email: string
  onEmail: (email: string) => void
  password: string
  onPassword: (password: string) => void
}) {
  return (
    <>
      <Field
        label="Email"
        id="email"
        type="email"
        autoComplete={newAccount ? 'email' : 'username'}
        required
        value={email}
        onChange={(e) => onEmail(e.target.value)}
      />
      <Field
        label="Password"
        id="password"
        type="password"
        autoComplete={newAccount ? 'new-password' : 'current-password'}
        required
        {...(newAccount ? { minLength: 8, 'aria-describedby': 'password-hint' } : {})}
        value={password}
        onChange={(e) => onPassword(e.target.value)}
      >
        {newAccount && (
          <span id="password-hint" className="hint">
            At least 8 characters.
          </span>
        )}
      </Field>
    </>
  )
}

/**
 * A sign-in or sign-up form's submit: the button is busy meanwhile, a failure is kept to show,
 * and success goes to `to`.
 */
function useAuthSubmit(action: () => Promise<unknown>, to: string) {
  const navigate = useNavigate()
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState(false)
  const submit = (e: FormEvent) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    action().then(
      () => navigate(to, { replace: true }),
      (err: unknown) => {
        setError(err)
        setBusy(false)
      },
    )
  }
  return { error, busy, submit }
}

export function SignIn() {
  const state = useSession()
  const [params] = useSearchParams()
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const next = safeNext(params.get('next'))
  const { error, busy, submit } = useAuthSubmit(() => session.signIn(email, password), next)

  if (state.status === 'loading') {
    return (
      <AuthFrame title="Sign in">
        <Loading label="Checking your session" />
      </AuthFrame>
    )
  }
  if (state.status === 'signed-in' && !busy) return <Navigate to={next} replace />

  return (
    <AuthFrame title="Sign in">
      <form onSubmit={submit} className="form">
        <ErrorBanner error={error} />
        <Credentials email={email} onEmail={setEmail} password={password} onPassword={setPassword} />
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
  const [name, setName] = useState('')
  const [email, setEmail] = useState('')
  const [password, setPassword] = useState('')
  const { error, busy, submit } = useAuthSubmit(() => session.signUp({ name, email, password }), '/prompts')
  if (state.status === 'signed-in' && !busy) return <Navigate to="/prompts" replace />
  // Without AUTH_ALLOW_SIGNUP the register route does not exist: say so plainly.
  const disabled = error instanceof PromptServiceError && error.status === 404

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
        <Field
          label="Name"
          id="name"
          autoComplete="name"
          required
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <Credentials
          newAccount
          email={email}
          onEmail={setEmail}
          password={password}
          onPassword={setPassword}
        />
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
