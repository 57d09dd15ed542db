import type { TSchema } from '@sinclair/typebox'
import * as meta from './meta.ts'
import * as prompts from './prompts.ts'

export * from './identity.ts'
export * from './meta.ts'
export * from './prompts.ts'

/** The `$id` schemas of this folder (appended to ALL_SCHEMAS). */
export const API_SCHEMAS: TSchema[] = [
  prompts.Deleted,
  prompts.OrganizationBody,
  prompts.PublicInvokeRequest,
  meta.HealthStatus,
  meta.HttpClientError,
  meta.OpenApiDocumentBody,
]
