import type { TSchema } from '@sinclair/typebox'
import { Pagination } from './common.ts'
import { ErrorBody, FieldError } from './errors.ts'
import { VersionPublishedEvent } from './events.ts'
import * as identity from './identity.ts'
import * as prompts from './prompts.ts'
import { API_SCHEMAS } from './api/index.ts'

/**
 * Every schema with an `$id`, in dependency order. Services add them all to Fastify so
 * that `Type.Ref` resolves; the OpenAPI document takes its components from here.
 */
export const ALL_SCHEMAS: TSchema[] = [
  FieldError,
  ErrorBody,
  Pagination,
  identity.Scope,
  identity.User,
  identity.LoginRequest,
  identity.LoginResponse,
  identity.Organization,
  identity.OrganizationList,
  identity.Membership,
  identity.RateLimitSetting,
  identity.CreateApiKeyRequest,
  identity.ApiKey,
  identity.CreatedApiKey,
  identity.ApiKeyList,
  identity.RegisterRequest,
  identity.CreateOrganizationRequest,
  identity.ResolvedApiKey,
  prompts.Variable,
  prompts.VariableInput,
  prompts.Prompt,
  prompts.PromptWithStale,
  prompts.CreatePromptRequest,
  prompts.UpdatePromptRequest,
  prompts.ListPromptsQuery,
  prompts.PromptSummary,
  prompts.PromptList,
  prompts.Author,
  prompts.PromptVersion,
  prompts.VersionList,
  prompts.PublishRequest,
  prompts.Pin,
  prompts.Environments,
  prompts.VariableValues,
  prompts.InvokeRequest,
  prompts.InvokeQuery,
  prompts.InvokeResult,
  prompts.InjectRequest,
  prompts.InjectResult,
  prompts.ResolvedPrompt,
  prompts.DraftPrompt,
  VersionPublishedEvent,
  ...API_SCHEMAS,
]
