import { PassThrough, type Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import multipart from '@fastify/multipart'
import { AppError, BatchParams, ImportAccepted, ImportBatch } from '@pm/contracts'
import { requireOrganization, requireUser, type Service } from '@pm/kit'
import type { PromptsDeps } from '../app.ts'
import { CsvFormatError, type CsvRow, parsePromptCsv } from '../domain/csv.ts'
import { OrgQuery } from './common.ts'

/**
 * Feeds the upload to the parser, refusing more than `maxBytes`. The upload is always read
 * to its end, whatever the parser does (a malformed file stops it early): the handler
 * answers only after the whole request is in, so the client (and the gateway in front)
 * reads a clean error response instead of a connection reset mid-upload.
 */
function feed(file: Readable, maxBytes: number): PassThrough {
  const source = new PassThrough()
  let total = 0
  file.on('data', (chunk: Buffer) => {
    total += chunk.length
    if (source.destroyed) return
    if (total > maxBytes) {
      source.destroy(new CsvFormatError(`the file is larger than ${maxBytes} bytes`, 'PAYLOAD_TOO_LARGE'))
      return
    }
    if (!source.write(chunk)) {
      file.pause()
      source.once('drain', () => file.resume())
    }
  })
  // A parser that stopped early leaves nobody to drain the pipe: keep the upload flowing.
  source.once('close', () => file.resume())
  file.once('end', () => {
    if (!source.destroyed) source.end()
  })
  file.once('error', (err) => {
    if (!source.destroyed) source.destroy(err)
  })
  return source
}

export function importRoutes(app: Service, { config, importer, service }: PromptsDeps): void {
  const limits = { maxBytes: config.CSV_MAX_BYTES, maxRows: config.CSV_MAX_ROWS }

  // Multipart parsing only in this scope: every other route stays JSON-only.
  app.register(async (scope: Service) => {
    await scope.register(multipart, {
      // One byte over the limit reaches the parser, which refuses it with a clear message;
      // busboy discards (but still reads) the rest.
      limits: { fileSize: limits.maxBytes + 1, files: 1, fields: 20, parts: 25 },
      throwFileSizeLimit: false,
    })

    scope.post(
      '/api/v1/prompts/import',
      { schema: { querystring: OrgQuery, response: { 202: ImportAccepted } } },
      async (request, reply) => {
        const userId = requireUser(request)
        const organizationId = requireOrganization(request)
        if (!request.isMultipart()) {
          throw new AppError(
            'UNSUPPORTED_MEDIA_TYPE',
            'send the CSV file as multipart/form-data in the field "file"',
          )
        }
        const part = await request.file()
        if (!part) {
          throw new AppError('VALIDATION_ERROR', 'a CSV file is required in the multipart field "file"', [
            { path: '/body/file', message: 'is required' },
          ])
        }
        if (part.fieldname !== 'file') {
          part.file.resume()
          await finished(part.file).catch(() => {})
          throw new AppError('VALIDATION_ERROR', 'the CSV file must be sent in the multipart field "file"', [
            { path: `/body/${part.fieldname}`, message: 'unexpected file field' },
          ])
        }
        // The whole file is parsed and checked before anything is written: a file that turns
        // out malformed at its last line imports nothing.
        const rows: CsvRow[] = []
        try {
          for await (const row of parsePromptCsv(feed(part.file, limits.maxBytes), limits)) rows.push(row)
        } finally {
          await finished(part.file).catch(() => {})
        }
        if (rows.length === 0) {
          throw new AppError('VALIDATION_ERROR', 'the file has a header but no data rows', [
            { path: '/body/file', message: 'no data rows' },
          ])
        }
        const batch = await importer.begin(organizationId, userId, rows)
        const bad = batch.errors.length
        reply.code(202)
        return {
          batchId: batch._id,
          message:
            `Importing ${batch.total} row${batch.total === 1 ? '' : 's'}` +
            (bad > 0 ? ` (${bad} with errors, reported in the batch status)` : '') +
            `; follow progress at GET /api/v1/prompts/import/${batch._id}`,
        }
      },
    )
  })

  app.get(
    '/api/v1/prompts/import/:batchId',
    { schema: { params: BatchParams, querystring: OrgQuery, response: { 200: ImportBatch } } },
    async (request) => {
      const batch = await service.store.getBatch(requireOrganization(request), request.params.batchId)
      if (!batch) throw new AppError('NOT_FOUND', 'import batch not found')
      return importer.view(batch)
    },
  )
}
