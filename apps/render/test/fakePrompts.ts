import type { AddressInfo } from 'node:net'
import {
  type ChatMessage,
  CONTEXT_HEADER,
  type EnvironmentName,
  type PromptConfig,
  type ResolvedPrompt,
  type Split,
  type Variable,
} from '@pm/contracts'
import { errorBody, type VerifiedContext, verifyContext } from '@pm/kit'
import Fastify, { type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify'

export interface FakeVersion {
  _id: string
  version: number
  template: string
  variables: Variable[]
  messages?: ChatMessage[]
  config?: PromptConfig
}

export interface FakePrompt {
  _id: string
  organizationId: string
  slug: string
  isPublic: boolean
  draft: { template: string; variables: Variable[]; messages?: ChatMessage[]; config?: PromptConfig }
  versions: FakeVersion[]
  currentVersionId: string | null
  environments: Record<EnvironmentName, string | null>
  /** An environment under a split: its pin (`environments`) names the first variant. */
  splits?: Partial<Record<EnvironmentName, Split>>
}

/**
 * Stands in for the prompts service's internal routes, with the same answers and error codes
 * (NOT_FOUND, NO_PUBLISHED_VERSION, VERSION_NOT_FOUND, ENVIRONMENT_NOT_SET), so that the render
 * service's own behaviour (caching, coalescing, invalidation) can be observed: it counts the
 * lookups it answers and can hold them back.
 */
export class FakePrompts {
  readonly prompts = new Map<string, FakePrompt>()
  readonly calls: Array<{ path: string; caller: VerifiedContext }> = []
  /** While set, resolve lookups wait for it before answering. */
  gate: Promise<void> | null = null
  private readonly app: FastifyInstance
  private readonly secret: string

  constructor(secret: string) {
    this.secret = secret
    this.app = Fastify()
    this.app.get('/health/live', async () => ({ status: 'ok' }))
    this.app.get<{ Params: { id?: string; slug?: string }; Querystring: Record<string, string> }>(
      '/internal/prompts/slug/:slug/resolve',
      (request, reply) => this.resolve(request, reply),
    )
    this.app.get<{ Params: { id?: string; slug?: string }; Querystring: Record<string, string> }>(
      '/internal/prompts/:id/resolve',
      (request, reply) => this.resolve(request, reply),
    )
    this.app.get<{ Params: { id: string } }>('/internal/prompts/:id/draft', async (request, reply) => {
      const caller = verifyContext(request.headers[CONTEXT_HEADER] as string | undefined, this.secret)
      if (!caller) return reply.code(401).send(errorBody('INVALID_CREDENTIALS', 'no context', 'x'))
      this.calls.push({ path: request.url, caller })
      const p = this.prompts.get(request.params.id)
      if (!p || p.organizationId !== caller.organizationId)
        return reply.code(404).send(errorBody('NOT_FOUND', 'prompt not found', request.id))
      return { promptId: p._id, organizationId: p.organizationId, ...p.draft }
    })
  }

  private async resolve(
    request: FastifyRequest<{ Params: { id?: string; slug?: string }; Querystring: Record<string, string> }>,
    reply: FastifyReply,
  ): Promise<unknown> {
    {
      const caller = verifyContext(request.headers[CONTEXT_HEADER] as string | undefined, this.secret)
      if (!caller) return reply.code(401).send(errorBody('INVALID_CREDENTIALS', 'no context', 'x'))
      this.calls.push({ path: request.url, caller })
      if (this.gate) await this.gate
      const fail = (status: number, code: Parameters<typeof errorBody>[0]) =>
        reply.code(status).send(errorBody(code, code.toLowerCase(), request.id))
      const { slug } = request.params
      const publicOnly = request.query.public === 'true'
      // A public prompt's reference names the workspace in `org` (the caller may have none).
      const workspace = publicOnly && request.query.org ? request.query.org : caller.organizationId
      const p = slug
        ? [...this.prompts.values()].find((x) => x.slug === slug && x.organizationId === workspace)
        : this.prompts.get(request.params.id ?? '')
      if (!p || (publicOnly ? !p.isPublic : p.organizationId !== caller.organizationId))
        return fail(404, 'NOT_FOUND')
      let v: FakeVersion | undefined
      if (request.query.version) {
        v = p.versions.find((x) => x.version === Number(request.query.version))
        if (!v) return fail(404, 'VERSION_NOT_FOUND')
      } else if (request.query.env) {
        const pinned = p.environments[request.query.env as EnvironmentName]
        if (!pinned) return fail(404, 'ENVIRONMENT_NOT_SET')
        v = p.versions.find((x) => x._id === pinned)
      } else {
        v = p.versions.find((x) => x._id === p.currentVersionId)
        if (!v) return fail(400, 'NO_PUBLISHED_VERSION')
      }
      if (!v) return fail(404, 'VERSION_NOT_FOUND')
      const resolved: ResolvedPrompt = {
        promptId: p._id,
        organizationId: p.organizationId,
        versionId: v._id,
        version: v.version,
        template: v.template,
        variables: v.variables,
        ...(v.messages ? { messages: v.messages } : {}),
        ...(v.config ? { config: v.config } : {}),
      }
      const split = request.query.env ? p.splits?.[request.query.env as EnvironmentName] : undefined
      return split ? { ...resolved, split } : resolved
    }
  }

  async start(): Promise<string> {
    await this.app.listen({ host: '127.0.0.1', port: 0 })
    return `http://127.0.0.1:${(this.app.server.address() as AddressInfo).port}`
  }

  async close(): Promise<void> {
    await this.app.close()
  }

  /** Lookups (resolve and draft) made for this prompt so far. */
  callsFor(promptId: string): number {
    return this.calls.filter((c) => c.path.startsWith(`/internal/prompts/${promptId}/`)).length
  }

  /** Publishes the draft as the next version and makes it current. */
  publish(promptId: string): FakeVersion {
    const p = this.prompts.get(promptId)
    if (!p) throw new Error(`no prompt ${promptId}`)
    const v: FakeVersion = {
      _id: hexId(),
      version: p.versions.length + 1,
      template: p.draft.template,
      variables: p.draft.variables,
      ...(p.draft.messages ? { messages: p.draft.messages } : {}),
      ...(p.draft.config ? { config: p.draft.config } : {}),
    }
    p.versions.push(v)
    p.currentVersionId = v._id
    return v
  }

  add(organizationId: string, template: string, variables: Variable[] = []): FakePrompt {
    const p: FakePrompt = {
      _id: hexId(),
      organizationId,
      slug: `p-${counter + 1}`,
      isPublic: false,
      draft: { template, variables },
      versions: [],
      currentVersionId: null,
      environments: { preview: null, production: null },
    }
    this.prompts.set(p._id, p)
    return p
  }
}

let counter = 0
export function hexId(): string {
  counter++
  return (Date.now().toString(16) + counter.toString(16).padStart(6, '0')).padStart(24, '0').slice(-24)
}
