import { finished } from 'node:stream/promises'
import multipart from '@fastify/multipart'
import { API_ROUTES, AppError, MiB } from '@pm/contracts'
import { requireOrganization, requireUser, route, type Service } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import type { PromptsDeps } from '../deps.ts'
import type { Upload } from '../services/files.ts'
import { auditContextOf } from './common.ts'

/** The whole upload (the gateway's limit for the route, held here too), and the number of files. */
const MAX_UPLOAD_BYTES = 10 * MiB
const MAX_FILES = 500
const MAX_EXPECT_CHARS = 200_000

// File names as the client sent them, for the plan: printable, at most 255 characters.
function cleanName(name: string | undefined, index: number): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are dropped from names
  const clean = (name ?? '').replace(/[\u0000-\u001F\u007F]/g, '').slice(0, 255)
  return clean === '' ? `file-${index + 1}` : clean
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', message, [{ path, message }])
}

/** `{slug: revision}`, from the multipart field `expect`. */
function readExpect(text: string): Record<string, string> {
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch {
    throw invalid('/body/expect', 'expect must be a JSON object {slug: revision}')
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw invalid('/body/expect', 'expect must be a JSON object {slug: revision}')
  const out: Record<string, string> = {}
  for (const [slug, revision] of Object.entries(value)) {
    if (typeof revision !== 'string' || revision.length > 100)
      throw invalid('/body/expect', `expect.${slug.slice(0, 100)} must be a revision string`)
    out[slug] = revision
  }
  return out
}

/** The files of the field `file` and the optional field `expect`, read whole and bounded. */
async function readUploads(
  request: FastifyRequest,
): Promise<{ uploads: Upload[]; expect: Record<string, string> }> {
  const uploads: Upload[] = []
  let expect: Record<string, string> = {}
  let total = 0
  let refused: AppError | undefined
  try {
    for await (const part of request.parts()) {
      if (part.type === 'field') {
        if (part.fieldname !== 'expect') {
          refused ??= invalid(`/body/${part.fieldname}`, `unexpected field ${part.fieldname}`)
        } else if (typeof part.value !== 'string' || part.value.length > MAX_EXPECT_CHARS) {
          refused ??= invalid('/body/expect', 'expect is too long')
        } else {
          expect = readExpect(part.value)
        }
        continue
      }
      if (part.fieldname !== 'file') {
        part.file.resume()
        await finished(part.file).catch(() => {})
        refused ??= invalid(`/body/${part.fieldname}`, 'send the files in the multipart field "file"')
        continue
      }
      const chunks: Buffer[] = []
      for await (const chunk of part.file) {
        total += (chunk as Buffer).length
        if (total > MAX_UPLOAD_BYTES)
          refused ??= new AppError('PAYLOAD_TOO_LARGE', `the upload is larger than ${MAX_UPLOAD_BYTES} bytes`)
        else chunks.push(chunk as Buffer)
      }
      uploads.push({ name: cleanName(part.filename, uploads.length), bytes: Buffer.concat(chunks) })
    }
  } catch (err) {
    if (err instanceof AppError) throw err
    if ((err as { code?: unknown }).code === 'FST_FILES_LIMIT')
      throw invalid('/body/file', `at most ${MAX_FILES} files per import`)
    const status = (err as { statusCode?: unknown }).statusCode
    if (typeof status === 'number' && status >= 400 && status < 500) throw err
    const message = err instanceof Error ? err.message : 'unreadable'
    throw invalid('/body', `the multipart body is malformed: ${message}`)
  }
  if (refused) throw refused
  if (uploads.length === 0)
    throw invalid('/body/file', 'at least one file is required in the multipart field "file"')
  return { uploads, expect }
}

export function fileRoutes(app: Service, { files }: PromptsDeps): void {
  route(app, API_ROUTES.exportPrompt, async (request, reply) => {
    const { format, version, env } = request.query
    const file = await files.exportOne(requireOrganization(request), request.params.id, {
      format,
      version,
      env,
    })
    reply
      .header('content-type', file.contentType)
      .header('content-disposition', `attachment; filename="${file.filename}"`)
      .header('cache-control', 'no-store')
      // The draft's revision, for `pm push`'s optimistic concurrency (expect).
      .header('x-prompt-revision', file.revision)
    return file.text
  })

  route(app, API_ROUTES.exportWorkspace, async (request, reply) => {
    const organizationId = requireOrganization(request)
    // The gateway checked the caller's membership of the path's workspace; the context names it.
    if (request.params.id !== organizationId) throw new AppError('NOT_FOUND', 'organization not found')
    const format = request.query.format ?? 'dotprompt'
    reply
      .header('content-type', 'application/gzip')
      .header('content-disposition', `attachment; filename="prompts-${format}.tar.gz"`)
      .header('cache-control', 'no-store')
    return reply.send(files.exportWorkspace(organizationId, format, request.query.env))
  })

  // Multipart parsing only in this scope: every other route stays JSON-only.
  app.register(async (scope: Service) => {
    await scope.register(multipart, {
      // Each file may be up to the whole upload (an archive); a prompt file's own limit (1 MiB)
      // is checked per file, so an oversized one is an error of the plan.
      limits: { fileSize: MAX_UPLOAD_BYTES + 1, files: MAX_FILES, fields: 5, parts: MAX_FILES + 5 },
      throwFileSizeLimit: false,
    })
    route(scope, API_ROUTES.importFiles, async (request) => {
      const userId = requireUser(request)
      const organizationId = requireOrganization(request)
      if (!request.isMultipart()) {
        throw new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          'send the files as multipart/form-data in the field "file"',
        )
      }
      const { uploads, expect } = await readUploads(request)
      return files.importFiles(organizationId, { _id: userId }, uploads, {
        dryRun: request.query.dryRun === 'true',
        publish: request.query.publish === 'true',
        expect,
        caller: request.caller,
        audit: auditContextOf(request),
      })
    })
  })
}
