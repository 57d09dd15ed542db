import { API_ROUTES, AppError, CONTEXT_HEADER, type InvokeResult, type PromptReference } from '@pm/contracts'
import { requireOrganization, route, type Service } from '@pm/kit'
import {
  type ChatRenderOutcome,
  compileChat,
  compileLogic,
  renderChat,
  renderCompiled,
  renderTemplate,
} from '@pm/template'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { RenderDeps } from '../deps.ts'
import {
  chatHasReferences,
  type FetchReference,
  renderComposed,
  renderComposedChat,
} from '../services/compose.ts'
import type { Resolver, ResolveRequest, Served, Snapshot } from '../services/resolver.ts'

/**
 * Every render route's body is optional (its declaration says so): a request without a body,
 * or with a JSON `null`, means "no variables" and is validated as `{}`.
 */
async function noBodyAsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined || request.body === null) request.body = {}
}

/** Who asks, as render forwards it to the prompts service. */
function callerOf(
  request: FastifyRequest,
): Pick<ResolveRequest, 'organizationId' | 'contextHeader' | 'requestId'> {
  return {
    organizationId: request.caller.organizationId,
    contextHeader: String(request.headers[CONTEXT_HEADER]),
    requestId: request.id,
  }
}

function lookup(request: FastifyRequest, promptId: string): Omit<ResolveRequest, 'publicOnly'> {
  return { promptId, ...callerOf(request) }
}

/** Names the missing variables, and the supplied ones the prompt does not declare (a typo, often). */
function missingRequired(names: string[], declared: readonly { name: string }[], values: object): AppError {
  const known = new Set(declared.map((v) => v.name))
  const unknown = Object.keys(values).filter((name) => !known.has(name))
  const sent = unknown.length > 0 ? `; sent but not declared: ${unknown.join(', ')}` : ''
  return new AppError(
    'MISSING_REQUIRED_VARIABLES',
    `missing required variables: ${names.join(', ')}${sent}`,
    names,
  )
}

/** A chat placeholder's value must be a list of `{role, content}` (DESIGN section 9). */
function notMessageLists(names: string[]): AppError {
  return new AppError(
    'VALIDATION_ERROR',
    `not a list of {role, content} messages: ${names.join(', ')}`,
    names.map((name) => ({
      path: `/body/variables/${name}`,
      message: 'must be an array of {role, content} with a known role and text content',
    })),
  )
}

const SUBJECT_MAX = 256

/**
 * Who an invoke is for (DESIGN section 15): `subject` in the body, else the `X-Subject-Id` header
 * (1 to 256 characters; the body's schema checks its own).
 */
function subjectOf(request: FastifyRequest, body: { subject?: string }): string | undefined {
  if (body.subject !== undefined) return body.subject
  const header = request.headers['x-subject-id']
  if (header === undefined) return undefined
  if (typeof header !== 'string' || header.length === 0 || header.length > SUBJECT_MAX) {
    throw new AppError('VALIDATION_ERROR', `X-Subject-Id must be 1 to ${SUBJECT_MAX} characters`, [
      { path: '/headers/x-subject-id', message: `must be 1 to ${SUBJECT_MAX} characters` },
    ])
  }
  return header
}

/** The result of a served request: the variant under a split, counted; the version in a header. */
function served(
  result: InvokeResult,
  s: Served,
  reply: FastifyReply,
  countVariant: RenderDeps['countVariant'],
): InvokeResult {
  reply.header('x-prompt-version', String(s.snapshot.version))
  if (s.variant === undefined || s.splitId === undefined) return result
  countVariant?.(s.splitId, s.variant)
  return { ...result, variant: s.variant }
}

/** Renders a published snapshot; required variables are the prompt's contract, enforced here. */
function invokeResult(
  snapshot: Snapshot,
  values: Record<string, unknown>,
  reply: FastifyReply,
  maxOutputBytes: number,
): InvokeResult {
  if (snapshot.chat) return invokeChat(snapshot, snapshot.chat, values, reply, maxOutputBytes)
  const outcome = renderCompiled(snapshot.compiled, snapshot.variables, values, 'invoke', { maxOutputBytes })
  if (outcome.missingRequired.length > 0)
    throw missingRequired(outcome.missingRequired, snapshot.variables, values)
  reply.header('x-service-version', String(snapshot.version))
  const result: InvokeResult = {
    renderedContent: outcome.renderedContent,
    variables: values,
    promptId: snapshot.promptId,
    versionId: snapshot.versionId,
    version: snapshot.version,
  }
  if (snapshot.config) result.config = snapshot.config
  return result
}

function invokeChat(
  snapshot: Snapshot,
  chat: NonNullable<Snapshot['chat']>,
  values: Record<string, unknown>,
  reply: FastifyReply,
  maxOutputBytes: number,
): InvokeResult {
  return chatResult(
    snapshot,
    renderChat(chat, snapshot.variables, values, 'invoke', { maxOutputBytes }),
    values,
    reply,
  )
}

/** A chat rendering's answer (its refusals first), with the references it resolved if any. */
function chatResult(
  snapshot: Snapshot,
  outcome: ReturnType<typeof renderChat> & { references?: InvokeResult['references'] },
  values: Record<string, unknown>,
  reply: FastifyReply,
): InvokeResult {
  if (outcome.missingRequired.length > 0)
    throw missingRequired(outcome.missingRequired, snapshot.variables, values)
  if (outcome.invalidPlaceholders.length > 0) throw notMessageLists(outcome.invalidPlaceholders)
  reply.header('x-service-version', String(snapshot.version))
  return {
    renderedContent: outcome.renderedContent,
    variables: values,
    promptId: snapshot.promptId,
    versionId: snapshot.versionId,
    version: snapshot.version,
    renderedMessages: outcome.renderedMessages,
    ...(snapshot.config ? { config: snapshot.config } : {}),
    ...(outcome.references ? { references: outcome.references } : {}),
  }
}

/**
 * How a template's references are fetched: in the caller's workspace through the resolver's
 * caches, or, for the public catalog, only when the included prompt is public too. The
 * invoke's subject goes along, so `{{> child@production}}` under a split serves the subject the
 * variant that invoking the child directly would.
 */
function referenceFetcher(
  resolver: Resolver,
  request: FastifyRequest,
  opts: { publicOf?: { organizationId: string }; subject?: string | undefined } = {},
): FetchReference {
  const { publicOf, subject } = opts
  const caller = callerOf(request)
  return (ref) => {
    const selector = {
      ...(ref.via === 'version' && ref.version !== undefined ? { version: ref.version } : {}),
      ...(ref.via === 'preview' || ref.via === 'production' ? { env: ref.via } : {}),
    }
    if (publicOf) {
      return resolver.resolvePublicReference({
        ...caller,
        organizationId: publicOf.organizationId,
        slug: ref.slug,
        ...selector,
        ...(subject !== undefined ? { subject } : {}),
      })
    }
    return resolver.resolveBySlug({
      ...caller,
      slug: ref.slug,
      ...selector,
      ...(subject !== undefined ? { subject } : {}),
    })
  }
}

/** Invoke of a text snapshot with blocks or references (the flat path renders all others). */
async function invokeComposed(
  snapshot: Snapshot & { logic: NonNullable<Snapshot['logic']> },
  values: Record<string, unknown>,
  reply: FastifyReply,
  maxOutputBytes: number,
  fetch: FetchReference,
): Promise<InvokeResult> {
  const outcome = await renderComposed(
    {
      slug: snapshot.slug ?? snapshot.promptId,
      logic: snapshot.logic,
      promptId: snapshot.promptId,
      variables: snapshot.variables,
    },
    values,
    'invoke',
    fetch,
    maxOutputBytes,
  )
  if (outcome.missingRequired.length > 0)
    throw missingRequired(outcome.missingRequired, snapshot.variables, values)
  reply.header('x-service-version', String(snapshot.version))
  return {
    renderedContent: outcome.renderedContent,
    variables: values,
    promptId: snapshot.promptId,
    versionId: snapshot.versionId,
    version: snapshot.version,
    ...(snapshot.config ? { config: snapshot.config } : {}),
    ...(snapshot.logic.occurrences.length > 0 ? { references: outcome.references } : {}),
  }
}

/** Invoke of a chat snapshot whose messages include other prompts: references resolved first. */
async function invokeComposedChat(
  snapshot: Snapshot,
  chat: NonNullable<Snapshot['chat']>,
  values: Record<string, unknown>,
  reply: FastifyReply,
  maxOutputBytes: number,
  fetch: FetchReference,
): Promise<InvokeResult> {
  const outcome = await renderComposedChat(
    {
      slug: snapshot.slug ?? snapshot.promptId,
      chat,
      promptId: snapshot.promptId,
      variables: snapshot.variables,
    },
    values,
    'invoke',
    fetch,
    maxOutputBytes,
  )
  return chatResult(snapshot, outcome, values, reply)
}

/** Invoke of any snapshot: composed when it has logic or references, the flat path otherwise. */
function invokeAny(
  snapshot: Snapshot,
  values: Record<string, unknown>,
  reply: FastifyReply,
  maxOutputBytes: number,
  fetch: () => FetchReference,
): InvokeResult | Promise<InvokeResult> {
  const { logic, chat } = snapshot
  if (logic) return invokeComposed({ ...snapshot, logic }, values, reply, maxOutputBytes, fetch())
  if (chat && chatHasReferences(chat)) {
    return invokeComposedChat(snapshot, chat, values, reply, maxOutputBytes, fetch())
  }
  return invokeResult(snapshot, values, reply, maxOutputBytes)
}

/** Query and body of invoke: the version asked for (query or body, not differing), or an env. */
function selector(
  query: { version?: number; env?: 'preview' | 'production' },
  body: { version?: number },
): { version?: number; env?: 'preview' | 'production' } {
  const { env } = query
  if (query.version !== undefined && body.version !== undefined && query.version !== body.version) {
    throw new AppError('VALIDATION_ERROR', 'version in query and body differ', [
      { path: '/body/version', message: 'differs from the query' },
    ])
  }
  const version = query.version ?? body.version
  if (version !== undefined && env !== undefined) {
    throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
      { path: '/query/env', message: 'cannot be combined with version' },
    ])
  }
  return { version, env }
}

/** The draft's logic template; null without logic or when it does not parse (it then renders flat). */
function compileLogicOrNull(template: string): ReturnType<typeof compileLogic> {
  try {
    return compileLogic(template)
  } catch {
    return null
  }
}

export function renderRoutes(app: Service, { resolver, maxOutputBytes, countVariant }: RenderDeps): void {
  /** Invoke's answer for a resolved prompt (by id or by slug): rendered, then counted if split. */
  const answer = async (
    s: Served,
    body: { variables?: Record<string, unknown> },
    request: FastifyRequest,
    reply: FastifyReply,
    subject: string | undefined,
  ) =>
    served(
      await invokeAny(s.snapshot, body.variables ?? {}, reply, maxOutputBytes, () =>
        referenceFetcher(resolver, request, { subject }),
      ),
      s,
      reply,
      countVariant,
    )

  route(
    app,
    API_ROUTES.invokePrompt,
    async (request, reply) => {
      requireOrganization(request)
      const body = request.body ?? {}
      const subject = subjectOf(request, body)
      const s = await resolver.resolveServed({
        ...lookup(request, request.params.id),
        ...selector(request.query, body),
        publicOnly: false,
        ...(subject !== undefined ? { subject } : {}),
      })
      return answer(s, body, request, reply, subject)
    },
    { preValidation: noBodyAsObject },
  )

  // The same as invoke, the prompt named by its slug in the caller's workspace.
  route(
    app,
    API_ROUTES.invokePromptBySlug,
    async (request, reply) => {
      requireOrganization(request)
      const body = request.body ?? {}
      const subject = subjectOf(request, body)
      const s = await resolver.resolveBySlugServed({
        ...callerOf(request),
        slug: request.params.slug,
        ...selector(request.query, body),
        ...(subject !== undefined ? { subject } : {}),
      })
      return answer(s, body, request, reply, subject)
    },
    { preValidation: noBodyAsObject },
  )

  route(
    app,
    API_ROUTES.injectPrompt,
    async (request) => {
      requireOrganization(request)
      const draft = await resolver.draft({ ...lookup(request, request.params.id), publicOnly: false })
      const values = request.body?.variables ?? {}
      if (draft.messages) {
        const compiled = compileChat(draft.messages)
        const composed = chatHasReferences(compiled)
        const chat: ChatRenderOutcome & { references?: PromptReference[] } = composed
          ? await renderComposedChat(
              {
                slug: draft.slug ?? draft.promptId,
                chat: compiled,
                promptId: draft.promptId,
                variables: draft.variables,
              },
              values,
              'inject',
              referenceFetcher(resolver, request),
              maxOutputBytes,
            )
          : renderChat(compiled, draft.variables, values, 'inject', { maxOutputBytes })
        if (chat.invalidPlaceholders.length > 0) throw notMessageLists(chat.invalidPlaceholders)
        return {
          renderedContent: chat.renderedContent,
          unresolvedVariables: chat.unresolved,
          variables: values,
          renderedMessages: chat.renderedMessages,
          ...(draft.config ? { config: draft.config } : {}),
          ...(chat.references ? { references: chat.references } : {}),
        }
      }
      const logic = compileLogicOrNull(draft.template)
      if (logic) {
        const composed = await renderComposed(
          { slug: draft.slug ?? draft.promptId, logic, promptId: draft.promptId, variables: draft.variables },
          values,
          'inject',
          referenceFetcher(resolver, request),
          maxOutputBytes,
        )
        return {
          renderedContent: composed.renderedContent,
          unresolvedVariables: composed.unresolved,
          variables: values,
          ...(draft.config ? { config: draft.config } : {}),
          ...(logic.occurrences.length > 0 ? { references: composed.references } : {}),
        }
      }
      const outcome = renderTemplate(draft.template, draft.variables, values, 'inject', { maxOutputBytes })
      return {
        renderedContent: outcome.renderedContent,
        unresolvedVariables: outcome.unresolved,
        variables: values,
        ...(draft.config ? { config: draft.config } : {}),
      }
    },
    { preValidation: noBodyAsObject },
  )

  // No credentials: the prompts service answers only for a public prompt, with its current version.
  route(
    app,
    API_ROUTES.invokePublicPrompt,
    async (request, reply) => {
      const snapshot = await resolver.resolve({ ...lookup(request, request.params.id), publicOnly: true })
      // Its body has no `subject`: the header alone names who it is for (an include's split).
      const subject = subjectOf(request, {})
      return invokeAny(snapshot, request.body?.variables ?? {}, reply, maxOutputBytes, () =>
        referenceFetcher(resolver, request, {
          publicOf: { organizationId: snapshot.organizationId ?? '' },
          subject,
        }),
      )
    },
    { preValidation: noBodyAsObject },
  )
}
