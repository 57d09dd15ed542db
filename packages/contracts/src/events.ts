import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, Timestamp } from './common.ts'
import type { ExperimentCompletedEvent } from './experiments.ts'

/** JetStream stream that carries the durable, customer-visible events. */
export const EVENTS_STREAM = 'PM_EVENTS'
export const SUBJECTS = {
  /** Durable (JetStream), message id = version id. */
  versionPublished: 'pm.events.version.published',
  /** Durable (JetStream), message id = event id. */
  environmentPromoted: 'pm.events.environment.promoted',
  /** Durable (JetStream), message id = event id. */
  promptVisibilityChanged: 'pm.events.prompt.visibility.changed',
  /** Durable (JetStream), message id = event id. */
  promptDeleted: 'pm.events.prompt.deleted',
  /** Durable (JetStream), message id = event id: an included prompt moved (DESIGN section 12). */
  promptDependencyChanged: 'pm.events.prompt.dependency.changed',
  /** Durable (JetStream), message id = experiment id: an experiment ended (experiments service). */
  experimentCompleted: 'pm.events.experiment.completed',
  /** Durable (JetStream), message id = experiment id: an experiment to run (experiments' job queue). */
  experimentQueued: 'pm.events.experiment.queued',
  /**
   * Durable (JetStream), message id = entry id: an audit entry written by identity or webhooks in
   * the transaction of its change, relayed to the prompts service, which keeps the audit log.
   */
  auditEntry: 'pm.events.audit.entry',
  /** Fan-out, best effort (core NATS): render replicas drop cached lookups of this prompt. */
  promptChanged: 'pm.internal.prompt.changed',
  /** Fan-out, best effort (core NATS): gateway replicas drop the cached key. */
  apiKeyRevoked: 'pm.internal.apikey.revoked',
  /** Fan-out, best effort (core NATS): gateway replicas drop the cached membership. */
  membershipChanged: 'pm.internal.membership.changed',
} as const

/** Customer-visible event kinds, each a webhook subscription may ask for (DESIGN sections 6 and 9). */
export const EVENT_TYPES = [
  'version.published',
  'environment.promoted',
  'prompt.visibility.changed',
  'prompt.deleted',
  'prompt.dependency.changed',
  'experiment.completed',
] as const
export type EventType = (typeof EVENT_TYPES)[number]

/** What a subscription gets when it names no events. */
export const DEFAULT_EVENT_TYPES: readonly EventType[] = ['version.published']

/** The durable subject each event kind travels on. */
export const EVENT_SUBJECTS: Record<EventType, string> = {
  'version.published': SUBJECTS.versionPublished,
  'environment.promoted': SUBJECTS.environmentPromoted,
  'prompt.visibility.changed': SUBJECTS.promptVisibilityChanged,
  'prompt.deleted': SUBJECTS.promptDeleted,
  'prompt.dependency.changed': SUBJECTS.promptDependencyChanged,
  'experiment.completed': SUBJECTS.experimentCompleted,
}

export function isEventType(value: unknown): value is EventType {
  return typeof value === 'string' && (EVENT_TYPES as readonly string[]).includes(value)
}

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

const envelope = <T extends string>(type: T) => ({
  id: ObjectId,
  type: Type.Literal(type),
  createdAt: Timestamp,
  organizationId: ObjectId,
})

export const EnvironmentPromotedEvent = Type.Object(
  {
    ...envelope('environment.promoted'),
    data: Type.Object({
      promptId: ObjectId,
      slug: Type.String(),
      environment: Type.Union([Type.Literal('preview'), Type.Literal('production')]),
      versionId: ObjectId,
      version: Type.Integer(),
      /** The user or API key id that promoted. */
      promotedBy: Type.String(),
      /** A rollout (DESIGN section 15): the variants and their weights; absent for a plain promote. */
      split: Type.Optional(
        Type.Object({
          id: ObjectId,
          variants: Type.Array(
            Type.Object({ versionId: ObjectId, version: Type.Integer(), weight: Type.Integer() }),
          ),
        }),
      ),
    }),
  },
  { $id: 'EnvironmentPromotedEvent' },
)
export type EnvironmentPromotedEvent = Static<typeof EnvironmentPromotedEvent>

export const PromptVisibilityChangedEvent = Type.Object(
  {
    ...envelope('prompt.visibility.changed'),
    data: Type.Object({ promptId: ObjectId, slug: Type.String(), isPublic: Type.Boolean() }),
  },
  { $id: 'PromptVisibilityChangedEvent' },
)
export type PromptVisibilityChangedEvent = Static<typeof PromptVisibilityChangedEvent>

export const PromptDeletedEvent = Type.Object(
  { ...envelope('prompt.deleted'), data: Type.Object({ promptId: ObjectId, slug: Type.String() }) },
  { $id: 'PromptDeletedEvent' },
)
export type PromptDeletedEvent = Static<typeof PromptDeletedEvent>

/** A prompt whose render changes because a prompt it includes got a new version or pin. */
export const PromptDependencyChangedEvent = Type.Object(
  {
    ...envelope('prompt.dependency.changed'),
    data: Type.Object({
      /** The including prompt. */
      promptId: ObjectId,
      slug: Type.String(),
      /** The included prompt, and how the including one names it. */
      includedSlug: Type.String(),
      via: Type.Union([
        Type.Literal('latest'),
        Type.Literal('preview'),
        Type.Literal('production'),
        Type.Literal('version'),
      ]),
    }),
  },
  { $id: 'PromptDependencyChangedEvent' },
)
export type PromptDependencyChangedEvent = Static<typeof PromptDependencyChangedEvent>

export type ServiceEvent =
  | VersionPublishedEvent
  | EnvironmentPromotedEvent
  | PromptVisibilityChangedEvent
  | PromptDeletedEvent
  | PromptDependencyChangedEvent
  | ExperimentCompletedEvent

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
