import {
  AppError,
  type CallerContext,
  type EnvironmentName,
  type PromoteRequest,
  SPLIT_MAX_VARIANTS,
  SPLIT_MIN_VARIANTS,
} from '@pm/contracts'

/** What a promote names (DESIGN section 15): one version by id or number, or a split. */
export type PromoteTarget =
  | { versionId: string }
  | { version: number }
  | { split: { versionId: string; weight: number }[] }

/** Exactly one of versionId, version, split; anything else is 400 VALIDATION_ERROR. */
export function promoteTarget(body: PromoteRequest): PromoteTarget {
  const given = (['versionId', 'version', 'split'] as const).filter((k) => body[k] !== undefined)
  if (given.length !== 1) {
    throw new AppError('VALIDATION_ERROR', 'give exactly one of versionId, version or split', [
      { path: '/body', message: given.length === 0 ? 'names no version' : `names ${given.join(' and ')}` },
    ])
  }
  if (body.versionId !== undefined) return { versionId: body.versionId }
  if (body.version !== undefined) return { version: body.version }
  const split = body.split ?? []
  checkSplitWeights(split)
  return { split }
}

/** 2 to 5 distinct versions, integer weights summing to 100. */
export function checkSplitWeights(split: { versionId: string; weight: number }[]): void {
  if (split.length < SPLIT_MIN_VARIANTS || split.length > SPLIT_MAX_VARIANTS) {
    throw new AppError(
      'VALIDATION_ERROR',
      `a split has ${SPLIT_MIN_VARIANTS} to ${SPLIT_MAX_VARIANTS} versions`,
      [{ path: '/body/split', message: `has ${split.length} entries` }],
    )
  }
  const ids = new Set(split.map((v) => v.versionId))
  if (ids.size !== split.length) {
    throw new AppError('VALIDATION_ERROR', 'a split names each version once', [
      { path: '/body/split', message: 'names a version twice' },
    ])
  }
  const sum = split.reduce((total, v) => total + v.weight, 0)
  if (split.some((v) => !Number.isInteger(v.weight) || v.weight < 1) || sum !== 100) {
    throw new AppError(
      'VALIDATION_ERROR',
      `the weights of a split are whole percentages summing to 100 (got ${sum})`,
      [{ path: '/body/split', message: `weights sum to ${sum}` }],
    )
  }
}

export const PROMOTE_PROTECTED_SCOPE = 'environments:promote-protected'

/**
 * Whether the caller may promote to `env` (DESIGN section 15): an environment the organization
 * protects takes an OWNER/ADMIN user or an API key with environments:promote-protected.
 */
export function checkMayPromote(
  caller: CallerContext,
  env: EnvironmentName,
  protectedEnvs: readonly string[],
): void {
  if (!protectedEnvs.includes(env)) return
  if (caller.kind === 'user' && (caller.role === 'OWNER' || caller.role === 'ADMIN')) return
  if (caller.kind === 'apiKey' && caller.scopes.includes(PROMOTE_PROTECTED_SCOPE)) return
  throw new AppError(
    'FORBIDDEN',
    `${env} is a protected environment: promoting to it needs an OWNER or ADMIN, or an API key with the ${PROMOTE_PROTECTED_SCOPE} scope`,
  )
}
