import type { TSchema } from '@sinclair/typebox'
import * as identity from './identity.ts'
import * as meta from './meta.ts'
import * as prompts from './prompts.ts'
import * as webhooks from './webhookSubscriptions.ts'

export * from './identity.ts'
export * from './meta.ts'
export * from './prompts.ts'
export * from './webhookSubscriptions.ts'

/** The `$id` schemas of this folder, in dependency order (appended to ALL_SCHEMAS). */
export const API_SCHEMAS: TSchema[] = [
  identity.RefreshRequest,
  identity.LogoutRequest,
  identity.UpdateOrganizationRequest,
  identity.Member,
  identity.MemberList,
  identity.AddMemberRequest,
  identity.UpdateMemberRequest,
  prompts.Deleted,
  prompts.DiffHunk,
  prompts.VersionDiff,
  prompts.VariableListResult,
  prompts.UpdateVariableRequest,
  prompts.PromoteRequest,
  prompts.ForkRequest,
  prompts.ForkResult,
  prompts.PublicForkRequest,
  prompts.PublicPrompt,
  prompts.PublicPromptList,
  prompts.PublicInvokeRequest,
  prompts.ImportAccepted,
  prompts.ImportBatch,
  webhooks.WebhookSubscription,
  webhooks.CreatedWebhookSubscription,
  webhooks.WebhookSubscriptionList,
  webhooks.CreateWebhookRequest,
  webhooks.UpdateWebhookRequest,
  webhooks.DeliveryAttempt,
  webhooks.WebhookDelivery,
  webhooks.WebhookDeliveryList,
  meta.HealthStatus,
  meta.OpenApiDocumentBody,
]
