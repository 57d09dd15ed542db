import type { ApiKey, Organization } from '@pm/contracts'
import type { ApiKeyRecord, OrganizationRecord } from '../store/types.ts'

export function normaliseEmail(email: string): string {
  return email.trim().toLowerCase()
}

export function orgSlug(name: string): string {
  const base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, 60)
  return base || 'workspace'
}

export function publicOrganization(o: OrganizationRecord): Organization {
  return {
    _id: o._id,
    name: o.name,
    slug: o.slug,
    protectedEnvironments: o.protectedEnvironments ?? [],
    createdAt: o.createdAt,
    updatedAt: o.updatedAt,
  }
}

/** Never the hash: what lists and creation show of a key. */
export function publicApiKey(k: ApiKeyRecord): ApiKey {
  const { hash: _hash, ...rest } = k
  return rest
}
