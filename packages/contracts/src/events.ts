import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, Timestamp } from './common.ts'

/** JetStream stream that carries the durable, customer-visible events. */
export const EVENTS_STREAM = 'PM_EVENTS'
export const SUBJECTS = {
  /** Durable (JetStream), message id = version id. */
  versionPublished: 'pm.events.version.published',
  /** Fan-out, best effort (core NATS): render replicas drop cached lookups of this prompt. */
  promptChanged: 'pm.internal.prompt.changed',
  /** Fan-out, best effort (core NATS): gateway replicas drop the cached key. */
  apiKeyRevoked: 'pm.internal.apikey.revoked',
  /** Fan-out, best effort (core NATS): gateway replicas drop the cached membership. */
  membershipChanged: 'pm.internal.membership.changed',
} as const

export const EVENT_TYPES = ['version.published'] as const
export type EventType = (typeof EVENT_TYPES)[number]

export const VersionPublishedEvent = Type.Object(
  {
    id: ObjectId,
    type: Type.Literal('version.published'),
    createdAt: Timestamp,
    organizationId: ObjectId,
    data: Type.Object({
      promptId: ObjectId,
      name: Type.String(),
      slug: Type.String(),
      versionId: ObjectId,
      version: Type.Integer(),
      publishedAt: Timestamp,
      publishedBy: ObjectId,
      changeLog: Type.String(),
    }),
  },
  { $id: 'VersionPublishedEvent' },
)
export type VersionPublishedEvent = Static<typeof VersionPublishedEvent>

export const PROMPT_CHANGE_REASONS = [
  'published',
  'promoted',
  'unpublished',
  'visibility',
  'deleted',
  'updated',
] as const
export type PromptChangeReason = (typeof PROMPT_CHANGE_REASONS)[number]

export interface PromptChangedEvent {
  promptId: string
  organizationId: string
  reason: PromptChangeReason
  at: string
}

export interface ApiKeyRevokedEvent {
  keyId: string
  hash: string
  organizationId: string
}

export interface MembershipChangedEvent {
  organizationId: string
  userId: string
}
