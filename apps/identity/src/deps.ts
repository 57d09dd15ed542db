import type { IdentityConfig } from './config.ts'
import type { IdentityService } from './services/identity.ts'
import type { Sessions } from './services/sessions.ts'
import type { TokenIssuer } from './services/tokens.ts'

/** What identity's routes are given; route files import this, never app.ts. */
export interface IdentityDeps {
  config: IdentityConfig
  identity: IdentityService
  tokens: TokenIssuer
  sessions: Sessions
}
