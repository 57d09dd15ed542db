import { AppError, LoginRequest, LoginResponse, RegisterRequest } from '@pm/contracts'
import type { Service } from '@pm/kit'
import type { IdentityDeps } from '../app.ts'

export function authRoutes(app: Service, deps: IdentityDeps): void {
  const { identity, tokens, store } = deps

  app.post(
    '/api/v1/auth/login',
    { schema: { body: LoginRequest, response: { 200: LoginResponse } } },
    async (request) => {
      const user = await identity.authenticate(request.body.email, request.body.password)
      if (!user) throw new AppError('INVALID_CREDENTIALS', 'email or password is wrong')
      const [org] = await store.listOrganizationsForUser(user._id)
      const organizationId = org?._id ?? null
      const { token, expiresIn } = await tokens.issue(user._id, organizationId)
      request.log.info({ userId: user._id }, 'login')
      return {
        accessToken: token,
        tokenType: 'Bearer' as const,
        expiresIn,
        user: { _id: user._id, email: user.email, name: user.name },
        organizationId,
      }
    },
  )

  app.post('/api/v1/auth/register', { schema: { body: RegisterRequest } }, async (request, reply) => {
    if (!deps.config.AUTH_ALLOW_SIGNUP) {
      throw new AppError('NOT_FOUND', `route ${request.method} ${request.url.split('?')[0]} not found`)
    }
    const user = await identity.createUser(request.body)
    const organization = await identity.createOrganization(`${user.name}'s workspace`, user._id)
    const { token, expiresIn } = await tokens.issue(user._id, organization._id)
    reply.code(201)
    return {
      accessToken: token,
      tokenType: 'Bearer',
      expiresIn,
      user: { _id: user._id, email: user.email, name: user.name },
      organizationId: organization._id,
    }
  })

  app.get('/.well-known/jwks.json', { config: { auth: 'none' } }, async (_request, reply) => {
    reply.header('cache-control', 'public, max-age=300')
    return tokens.jwks()
  })
}
