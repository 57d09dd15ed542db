import {
  API_ROUTES,
  AppError,
  CSRF_HEADER,
  REFRESH_COOKIE,
  REFRESH_COOKIE_PATH,
  SESSION_HINT_COOKIE,
} from '@pm/contracts'
import { emptyBodyAsObject, requestOrigin, route, type Service } from '@pm/kit'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { IdentityDeps } from '../deps.ts'
import type { SessionTokens } from '../services/sessions.ts'

/**
 * Browser sessions (DESIGN section 10): the refresh token travels only in an HttpOnly,
 * Secure, SameSite=Strict cookie scoped to the auth routes. The gateway drops `Secure` in
 * development on plain HTTP (it alone knows the protocol the browser used). Beside it, a
 * secret-free `pm_session=1` tells the page whether a session may exist.
 */
function setRefreshCookie(reply: FastifyReply, token: string, maxAgeSeconds: number): void {
  reply.setCookie(REFRESH_COOKIE, token, {
    httpOnly: true,
    secure: true,
    sameSite: 'strict',
    path: REFRESH_COOKIE_PATH,
    maxAge: maxAgeSeconds,
  })
  reply.setCookie(SESSION_HINT_COOKIE, '1', {
    secure: true,
    sameSite: 'strict',
    path: '/',
    maxAge: maxAgeSeconds,
  })
}

function clearRefreshCookie(reply: FastifyReply): void {
  reply.clearCookie(REFRESH_COOKIE, {
    httpOnly: true,
    secure: true,
    sameSite: 'strict',
    path: REFRESH_COOKIE_PATH,
  })
  reply.clearCookie(SESSION_HINT_COOKIE, { secure: true, sameSite: 'strict', path: '/' })
}

/** The refresh token of the body, else of the cookie (which needs the CSRF header). */
function refreshTokenOf(
  request: FastifyRequest,
  fromBody: string | undefined,
): {
  token: string
  cookie: boolean
} {
  if (fromBody !== undefined) return { token: fromBody, cookie: false }
  const token = request.cookies[REFRESH_COOKIE]
  if (!token) {
    throw new AppError('VALIDATION_ERROR', 'refreshToken is required (in the body or the session cookie)', [
      { path: '/body/refreshToken', message: 'is required' },
    ])
  }
  const csrf = request.headers[CSRF_HEADER]
  if (typeof csrf !== 'string' || csrf.trim() === '') {
    throw new AppError('FORBIDDEN', `the ${CSRF_HEADER} header is required with the session cookie`)
  }
  return { token, cookie: true }
}

export function authRoutes(app: Service, deps: IdentityDeps): void {
  const { identity, tokens, sessions } = deps
  const cookieMaxAge = deps.config.REFRESH_TOKEN_TTL_SECONDS

  /** In cookie mode the refresh token goes into the cookie and out of the answer. */
  const answer = (reply: FastifyReply, session: SessionTokens, cookie: boolean | undefined) => {
    if (!cookie) return session
    const { refreshToken, ...rest } = session
    setRefreshCookie(reply, refreshToken, cookieMaxAge)
    reply.header('cache-control', 'no-store')
    return rest
  }

  route(app, API_ROUTES.login, async (request, reply) => {
    // A sign-in, failed or not, is in the audit log of each organization of the user (DESIGN section 15).
    const signedIn = await identity.signIn(request.body.email, request.body.password, requestOrigin(request))
    if (!signedIn) throw new AppError('INVALID_CREDENTIALS', 'email or password is wrong')
    const { user, organizations, audit } = signedIn
    const session = await sessions.start(user, organizations[0]?._id ?? null, audit)
    request.log.info({ userId: user._id, cookie: request.body.cookie === true }, 'login')
    return answer(reply, session, request.body.cookie)
  })

  route(app, API_ROUTES.refreshToken, async (request, reply) => {
    const { token, cookie } = refreshTokenOf(request, request.body.refreshToken)
    const outcome = await sessions.refresh(token, request.body.organizationId)
    if (!outcome.ok) {
      if (outcome.reason === 'reused') {
        request.log.warn(
          { userId: outcome.userId, familyId: outcome.familyId },
          'refresh token reused: the session is revoked',
        )
      }
      if (cookie) clearRefreshCookie(reply)
      throw new AppError('INVALID_CREDENTIALS', 'the refresh token is invalid, expired or revoked')
    }
    request.log.info({ userId: outcome.session.user._id, familyId: outcome.familyId }, 'session refreshed')
    return answer(reply, outcome.session, cookie)
  })

  route(
    app,
    API_ROUTES.logout,
    async (request, reply) => {
      const { token, cookie } = refreshTokenOf(request, request.body.refreshToken)
      await sessions.logout(token)
      if (cookie) clearRefreshCookie(reply)
      reply.code(204).send()
    },
    { preValidation: emptyBodyAsObject },
  )

  // Without AUTH_ALLOW_SIGNUP the route does not exist: 404 whatever the body.
  if (deps.config.AUTH_ALLOW_SIGNUP) {
    route(app, API_ROUTES.register, async (request, reply) => {
      const { cookie, ...input } = request.body
      const user = await identity.createUser(input)
      const organization = await identity.createOrganization(`${user.name}'s workspace`, user._id)
      request.log.info({ userId: user._id, organizationId: organization._id }, 'signed up')
      reply.code(201)
      return answer(reply, await sessions.start(user, organization._id), cookie)
    })
  }

  app.get('/.well-known/jwks.json', { config: { auth: 'none' } }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300')
    return tokens.jwks()
  })
}
