import { finished } from 'node:stream/promises'
import multipart from '@fastify/multipart'
import { API_ROUTES, AppError, DATASET_UPLOAD_MAX_BYTES } from '@pm/contracts'
import { auditContextOf, requireOrganization, route, type Service } from '@pm/kit'
import type { ExperimentsDeps } from '../deps.ts'
import { isJsonl, parseCsvItems, parseJsonlItems } from '../domain/items.ts'

/**
 * Reads the one file of the field "file" whole (at most DATASET_UPLOAD_MAX_BYTES): every part is
 * read to its end, so the client gets a clean answer rather than a reset mid-upload.
 */
async function readFile(
  request: Parameters<Parameters<typeof route>[2]>[0],
): Promise<{ data: Buffer; filename: string; mimetype: string }> {
  let file: { data: Buffer; filename: string; mimetype: string } | undefined
  let refused: AppError | undefined
  try {
    for await (const part of request.parts()) {
      if (part.type !== 'file') continue
      if (file !== undefined || part.fieldname !== 'file') {
        part.file.resume()
        await finished(part.file).catch(() => {})
        refused ??= new AppError('VALIDATION_ERROR', 'send one file, in the multipart field "file"', {
          errors: [{ path: `/body/${part.fieldname}`, message: 'unexpected file' }],
        })
        continue
      }
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of part.file as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size <= DATASET_UPLOAD_MAX_BYTES) chunks.push(chunk)
      }
      if (size > DATASET_UPLOAD_MAX_BYTES) {
        refused ??= new AppError(
          'PAYLOAD_TOO_LARGE',
          `the file is larger than ${DATASET_UPLOAD_MAX_BYTES} bytes`,
        )
      }
      file = { data: Buffer.concat(chunks), filename: part.filename, mimetype: part.mimetype }
    }
  } catch (err) {
    if (err instanceof AppError) throw err
    const status = (err as { statusCode?: unknown }).statusCode
    if (typeof status === 'number' && status >= 400 && status < 500) throw err
    const message = err instanceof Error ? err.message : 'unreadable'
    throw new AppError('VALIDATION_ERROR', `the multipart body is malformed: ${message}`, {
      errors: [{ path: '/body', message }],
    })
  }
  if (refused) throw refused
  if (!file) {
    throw new AppError('VALIDATION_ERROR', 'a file is required in the multipart field "file"', {
      errors: [{ path: '/body/file', message: 'is required' }],
    })
  }
  return file
}

export function datasetRoutes(app: Service, { service }: ExperimentsDeps): void {
  route(app, API_ROUTES.listDatasets, async (request) => {
    const { page, limit } = request.query
    return service.listDatasets(requireOrganization(request), { page, limit })
  })

  route(app, API_ROUTES.createDataset, async (request, reply) => {
    const dataset = await service.createDataset(
      requireOrganization(request),
      request.body,
      auditContextOf(request),
    )
    reply.code(201)
    return dataset
  })

  route(app, API_ROUTES.getDataset, async (request) =>
    service.getDataset(requireOrganization(request), request.params.id),
  )

  route(app, API_ROUTES.updateDataset, async (request) =>
    service.updateDataset(
      requireOrganization(request),
      request.params.id,
      request.body,
      auditContextOf(request),
    ),
  )

  route(app, API_ROUTES.deleteDataset, async (request) =>
    service.deleteDataset(requireOrganization(request), request.params.id, auditContextOf(request)),
  )

  route(app, API_ROUTES.listDatasetItems, async (request) => {
    const { page, limit } = request.query
    return service.listItems(requireOrganization(request), request.params.id, { page, limit })
  })

  route(app, API_ROUTES.addDatasetItems, async (request, reply) => {
    const added = await service.addItems(
      requireOrganization(request),
      request.params.id,
      request.body.items,
      auditContextOf(request),
    )
    reply.code(201)
    return added
  })

  route(app, API_ROUTES.deleteDatasetItem, async (request) =>
    service.deleteItem(
      requireOrganization(request),
      request.params.id,
      request.params.itemId,
      auditContextOf(request),
    ),
  )

  // Multipart parsing only in this scope: every other route stays JSON-only.
  app.register(async (scope: Service) => {
    await scope.register(multipart, {
      limits: { fileSize: DATASET_UPLOAD_MAX_BYTES + 1, files: 2, fields: 10, parts: 12 },
      throwFileSizeLimit: false,
    })
    route(scope, API_ROUTES.uploadDatasetItems, async (request, reply) => {
      const organizationId = requireOrganization(request)
      if (!request.isMultipart()) {
        throw new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          'send the file as multipart/form-data in the field "file"',
        )
      }
      const file = await readFile(request)
      const room = await service.room(organizationId, request.params.id)
      // The whole file is parsed first: a bad row (or one past the dataset's bound) imports nothing.
      const items = isJsonl(file.filename, file.mimetype)
        ? parseJsonlItems(file.data, Math.max(room, 0))
        : parseCsvItems(file.data, Math.max(room, 0), DATASET_UPLOAD_MAX_BYTES)
      const added = await service.addItems(
        organizationId,
        request.params.id,
        items,
        auditContextOf(request),
        `the file "${file.filename}"`,
      )
      reply.code(201)
      return added
    })
  })
}
