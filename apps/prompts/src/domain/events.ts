import {
  type EnvironmentName,
  type EnvironmentPromotedEvent,
  EVENT_SUBJECTS,
  type Pin,
  type PromptDeletedEvent,
  type PromptVisibilityChangedEvent,
  type ServiceEvent,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import type { OutboxRecord, PromptRecord } from '../store/types.ts'

/**
 * The outbox rows of the events beside `version.published` (DESIGN section 9). Each is written
 * in the same transaction as its change; its message id is the event id, which the row keeps,
 * so a relay that sends a row twice after a crash is recognised by JetStream as a duplicate.
 */
function outboxRow(event: ServiceEvent): OutboxRecord {
  return {
    _id: event.id,
    subject: EVENT_SUBJECTS[event.type],
    msgId: event.id,
    payload: event,
    createdAt: event.createdAt,
    sentAt: null,
  }
}

export function environmentPromoted(
  prompt: PromptRecord,
  environment: EnvironmentName,
  pin: Pin,
): OutboxRecord {
  const event: EnvironmentPromotedEvent = {
    id: newId(),
    type: 'environment.promoted',
    createdAt: pin.promotedAt,
    organizationId: prompt.organizationId,
    data: {
      promptId: prompt._id,
      slug: prompt.slug,
      environment,
      versionId: pin.versionId,
      version: pin.version,
      promotedBy: pin.promotedBy,
      ...(pin.split
        ? {
            split: {
              id: pin.split.id,
              variants: pin.split.variants.map(({ versionId, version, weight }) => ({
                versionId,
                version,
                weight,
              })),
            },
          }
        : {}),
    },
  }
  return outboxRow(event)
}

/** The visibility event when the change made `isPublic` differ, else nothing. */
export function visibilityChanged(before: PromptRecord, after: PromptRecord): OutboxRecord[] {
  if (before.isPublic === after.isPublic) return []
  const event: PromptVisibilityChangedEvent = {
    id: newId(),
    type: 'prompt.visibility.changed',
    createdAt: after.updatedAt,
    organizationId: after.organizationId,
    data: { promptId: after._id, slug: after.slug, isPublic: after.isPublic },
  }
  return [outboxRow(event)]
}

export function promptDeleted(prompt: PromptRecord, at: string): OutboxRecord {
  const event: PromptDeletedEvent = {
    id: newId(),
    type: 'prompt.deleted',
    createdAt: at,
    organizationId: prompt.organizationId,
    data: { promptId: prompt._id, slug: prompt.slug },
  }
  return outboxRow(event)
}
