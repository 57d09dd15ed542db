import { API_ROUTES, AppError, type CallerContext } from '@pm/contracts'
import { requireOrganization, requireUser, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { auditContextOf } from './common.ts'
import { publicPrompt } from '../domain/views.ts'

/**
 * The workspace to fork into. The gateway checked the caller's ACTIVE membership there and
 * says so in the signed context; a target it did not check is refused (fork rule 3).
 */
function forkTarget(caller: CallerContext, asked: string): string {
  if (caller.targetOrganizationId !== asked) {
    throw new AppError('MEMBERSHIP_REQUIRED', 'an ACTIVE membership in the target organization is required')
  }
  return asked
}

export function forkRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.forkVersion, async (request, reply) => {
    const userId = requireUser(request)
    const sourceOrganizationId = requireOrganization(request)
    const source = await service.get(sourceOrganizationId, request.params.id)
    const version = await service.version(source, request.params.versionId)
    const target = forkTarget(request.caller, request.body.targetOrganizationId ?? sourceOrganizationId)
    const fork = await service.fork(
      source,
      version,
      target,
      request.body.name,
      { _id: userId },
      auditContextOf(request),
    )
    reply.code(201)
    return { prompt: publicPrompt(fork.prompt), version: fork.version }
  })

  route(app, API_ROUTES.forkPublicPrompt, async (request, reply) => {
    const userId = requireUser(request)
    // The last published snapshot of a public prompt, from any workspace.
    const { prompt, version } = await service.publicEntry(request.params.id)
    const target = forkTarget(request.caller, request.body.organizationId)
    const fork = await service.fork(
      prompt,
      version,
      target,
      request.body.name,
      { _id: userId },
      auditContextOf(request),
    )
    reply.code(201)
    return publicPrompt(fork.prompt)
  })
}
