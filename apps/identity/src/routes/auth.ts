import {
  AppError,
  LoginRequest,
  LoginResponse,
  LogoutRequest,
  RefreshRequest,
  RegisterRequest,
} from '@pm/contracts'
import type { Service } from '@pm/kit'
import type { IdentityDeps } from '../app.ts'

export function authRoutes(app: Service, deps: IdentityDeps): void {
  const { identity, tokens, store, sessions } = deps

  app.post(
    '/api/v1/auth/login',
    { schema: { body: LoginRequest, response: { 200: LoginResponse } } },
    async (request) => {
      const user = await identity.authenticate(request.body.email, request.body.password)
      if (!user) throw new AppError('INVALID_CREDENTIALS', 'email or password is wrong')
      const [org] = await store.listOrganizationsForUser(user._id)
      const session = await sessions.start(user, org?._id ?? null)
      request.log.info({ userId: user._id }, 'login')
      return session
    },
  )

  app.post(
    '/api/v1/auth/refresh',
    { schema: { body: RefreshRequest, response: { 200: LoginResponse } } },
    async (request) => {
      const outcome = await sessions.refresh(request.body.refreshToken, request.body.organizationId)
      if (!outcome.ok) {
        if (outcome.reason === 'reused') {
          request.log.warn(
            { userId: outcome.userId, familyId: outcome.familyId },
            'refresh token reused: the session is revoked',
          )
        }
        throw new AppError('INVALID_CREDENTIALS', 'the refresh token is invalid, expired or revoked')
      }
      request.log.info({ userId: outcome.session.user._id, familyId: outcome.familyId }, 'session refreshed')
      return outcome.session
    },
  )

  app.post('/api/v1/auth/logout', { schema: { body: LogoutRequest } }, async (request, reply) => {
    await sessions.logout(request.body.refreshToken)
    reply.code(204).send()
  })

  // Without AUTH_ALLOW_SIGNUP the route does not exist: 404 whatever the body.
  if (deps.config.AUTH_ALLOW_SIGNUP) {
    app.post(
      '/api/v1/auth/register',
      { schema: { body: RegisterRequest, response: { 201: LoginResponse } } },
      async (request, reply) => {
        const user = await identity.createUser(request.body)
        const organization = await identity.createOrganization(`${user.name}'s workspace`, user._id)
        request.log.info({ userId: user._id, organizationId: organization._id }, 'signed up')
        reply.code(201)
        return sessions.start(user, organization._id)
      },
    )
  }

  app.get('/.well-known/jwks.json', { config: { auth: 'none' } }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300')
    return tokens.jwks()
  })
}
