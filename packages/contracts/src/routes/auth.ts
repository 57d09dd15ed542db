import { LoginRequest, LoginResponse, LogoutRequest, RefreshRequest, RegisterRequest } from '../identity.ts'
import type { RouteSpec } from './spec.ts'

/** Sign-in, sign-up and session tokens (identity). */
export const AUTH_ROUTES = {
  // ---- auth

  login: {
    method: 'POST',
    path: '/api/v1/auth/login',
    tag: 'auth',
    summary: 'Sign in',
    description:
      'Returns a user access token (JWT, 15 minutes by default), an opaque refresh token and the ' +
      "user's first organization. Rate limited per IP and per email. With `cookie: true` (browser " +
      'sessions) the refresh token is set as an HttpOnly, SameSite=Strict cookie on /api/v1/auth ' +
      'instead of being answered.',
    auth: 'public',
    upstream: 'identity',
    workspace: 'none',
    limit: 'login',
    body: LoginRequest,
    status: 200,
    response: LoginResponse,
    errors: ['INVALID_CREDENTIALS'],
  },
  register: {
    method: 'POST',
    path: '/api/v1/auth/register',
    tag: 'auth',
    summary: 'Sign up',
    description:
      'Creates a user and a personal organization (OWNER). Exists only when the service runs ' +
      'with `AUTH_ALLOW_SIGNUP=true`; otherwise it answers 404.',
    auth: 'public',
    upstream: 'identity',
    workspace: 'none',
    limit: 'login',
    body: RegisterRequest,
    status: 201,
    response: LoginResponse,
    errors: ['CONFLICT', 'NOT_FOUND'],
  },
  refreshToken: {
    method: 'POST',
    path: '/api/v1/auth/refresh',
    tag: 'auth',
    summary: 'Exchange a refresh token',
    description:
      'Rotates the refresh token: the answer carries a new one. Reusing a spent refresh token ' +
      "revokes its whole family. `organizationId` switches the new token's current organization " +
      '(an ACTIVE membership, else 404). Without `refreshToken` the session cookie is used: the ' +
      '`X-CSRF-Protection` header is then required (else 403 FORBIDDEN) and the new token is set ' +
      'as the cookie again.',
    auth: 'public',
    upstream: 'identity',
    workspace: 'none',
    limit: 'login',
    body: RefreshRequest,
    status: 200,
    response: LoginResponse,
    errors: ['INVALID_CREDENTIALS', 'NOT_FOUND', 'FORBIDDEN'],
  },
  logout: {
    method: 'POST',
    path: '/api/v1/auth/logout',
    tag: 'auth',
    summary: 'Sign out',
    description:
      'Revokes the refresh token (and its family): the one in the body, or the session cookie ' +
      '(then the `X-CSRF-Protection` header is required) which is cleared.',
    auth: 'public',
    upstream: 'identity',
    workspace: 'none',
    limit: 'login',
    body: LogoutRequest,
    bodyOptional: true,
    status: 204,
    errors: ['FORBIDDEN'],
  },
} as const satisfies Record<string, RouteSpec>
