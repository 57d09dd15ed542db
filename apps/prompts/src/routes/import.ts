import { PassThrough, type Readable } from 'node:stream'
import { finished } from 'node:stream/promises'
import multipart, { type Multipart } from '@fastify/multipart'
import { API_ROUTES, AppError } from '@pm/contracts'
import { requireOrganization, requireUser, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { type CsvLimits, CsvFormatError, type CsvRow, parsePromptCsv } from '../domain/csv.ts'

/**
 * Feeds the upload to the parser, refusing more than `maxBytes`. The upload is always read
 * to its end, whatever the parser does (a malformed file stops it early): the handler
 * answers only after the whole request is in, so the client (and the gateway in front)
 * reads a clean error response instead of a connection reset mid-upload. The chunks read
 * within the limit are collected in `kept`.
 */
function feed(file: Readable, maxBytes: number, kept: Buffer[]): PassThrough {
  const source = new PassThrough()
  let total = 0
  file.on('data', (chunk: Buffer) => {
    total += chunk.length
    if (source.destroyed) return
    if (total > maxBytes) {
      source.destroy(new CsvFormatError(`the file is larger than ${maxBytes} bytes`, 'PAYLOAD_TOO_LARGE'))
      return
    }
    // The file is kept whole (at most maxBytes) for its hash and for resuming the import.
    kept.push(chunk)
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
  // A malformed or truncated body can leave the file destroyed without an error (even before it
  // is handed over): without this the parser would wait for the rest forever.
  const ended = () => {
    if (!source.destroyed && !source.writableEnded)
      source.destroy(new CsvFormatError('the upload ended before the file did', 'VALIDATION_ERROR'))
  }
  if (file.destroyed) queueMicrotask(ended)
  else file.once('close', ended)
  return source
}

// Visible ASCII but the double quote and the backslash: what a Structured Field string
// (RFC 8941) may hold unescaped, as the IETF Idempotency-Key draft asks.
const KEY_CHARS = /^[\x21\x23-\x5b\x5d-\x7e]{1,255}$/

/** The Idempotency-Key header, quoted (as the draft writes it) or not; undefined when absent. */
export function readIdempotencyKey(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined
  const raw = Array.isArray(header) ? header.join(', ') : header.trim()
  const key = raw.length >= 2 && raw.startsWith('"') && raw.endsWith('"') ? raw.slice(1, -1) : raw
  if (!KEY_CHARS.test(key)) {
    throw new AppError('VALIDATION_ERROR', 'the Idempotency-Key header is not valid', [
      { path: '/headers/idempotency-key', message: 'must be 1 to 255 visible ASCII characters' },
    ])
  }
  return key
}

type Parts = AsyncIterableIterator<Multipart>

/**
 * The rows and bytes of the one file in the field "file". Every part is read to its end; a
 * second file, or a file in another field, is refused (400) rather than silently ignored
 * (issue 14, finding 9). The file is parsed whole before anything is written: one malformed at
 * its last line imports nothing.
 */
async function readUpload(parts: Parts, limits: CsvLimits): Promise<{ rows: CsvRow[]; kept: Buffer[] }> {
  let upload: { rows: CsvRow[]; kept: Buffer[] } | undefined
  let refused: AppError | undefined
  for await (const part of parts) {
    if (part.type !== 'file') continue
    if (upload !== undefined || part.fieldname !== 'file') {
      part.file.resume()
      await finished(part.file).catch(() => {})
      refused ??=
        part.fieldname !== 'file'
          ? new AppError('VALIDATION_ERROR', 'the CSV file must be sent in the multipart field "file"', [
              { path: `/body/${part.fieldname}`, message: 'unexpected file field' },
            ])
          : oneFileOnly()
      continue
    }
    const rows: CsvRow[] = []
    const kept: Buffer[] = []
    try {
      for await (const row of parsePromptCsv(feed(part.file, limits.maxBytes, kept), limits)) rows.push(row)
    } finally {
      await finished(part.file).catch(() => {})
    }
    upload = { rows, kept }
  }
  if (refused) throw refused
  if (upload === undefined) {
    throw new AppError('VALIDATION_ERROR', 'a CSV file is required in the multipart field "file"', [
      { path: '/body/file', message: 'is required' },
    ])
  }
  return upload
}

function oneFileOnly(): AppError {
  return new AppError('VALIDATION_ERROR', 'send one CSV file per import', [
    { path: '/body/file', message: 'only one file is allowed' },
  ])
}

/**
 * A failure while reading the upload: ours (AppError) and the multipart plugin's own (limits,
 * with a 4xx status) stay as they are; busboy's (no boundary, wrong boundary, truncated body,
 * malformed part headers) are plain errors, and mean the client's body is malformed.
 */
function malformed(err: unknown): unknown {
  if (err instanceof AppError) return err
  if ((err as { code?: unknown }).code === 'FST_FILES_LIMIT') return oneFileOnly()
  const status = (err as { statusCode?: unknown }).statusCode
  if (typeof status === 'number' && status >= 400 && status < 500) return err
  const message = err instanceof Error ? err.message : 'unreadable'
  return new AppError('VALIDATION_ERROR', `the multipart body is malformed: ${message}`, [
    { path: '/body', message },
  ])
}

export function importRoutes(app: Service, { config, importer }: PromptsDeps): void {
  const limits = { maxBytes: config.CSV_MAX_BYTES, maxRows: config.CSV_MAX_ROWS }

  // Multipart parsing only in this scope: every other route stays JSON-only.
  app.register(async (scope: Service) => {
    await scope.register(multipart, {
      // One byte over the limit reaches the parser, which refuses it with a clear message;
      // busboy discards (but still reads) the rest.
      limits: { fileSize: limits.maxBytes + 1, files: 1, fields: 20, parts: 25 },
      throwFileSizeLimit: false,
    })

    route(scope, API_ROUTES.importPrompts, async (request, reply) => {
      const userId = requireUser(request)
      const organizationId = requireOrganization(request)
      if (!request.isMultipart()) {
        throw new AppError(
          'UNSUPPORTED_MEDIA_TYPE',
          'send the CSV file as multipart/form-data in the field "file"',
        )
      }
      let upload: { rows: CsvRow[]; kept: Buffer[] }
      try {
        upload = await readUpload(request.parts(), limits)
      } catch (err) {
        throw malformed(err)
      }
      const { rows, kept } = upload
      const idempotencyKey = readIdempotencyKey(request.headers['idempotency-key'])
      if (rows.length === 0) {
        throw new AppError('VALIDATION_ERROR', 'the file has a header but no data rows', [
          { path: '/body/file', message: 'no data rows' },
        ])
      }
      const { batch, replayed } = await importer.begin({
        organizationId,
        userId,
        rows,
        file: Buffer.concat(kept),
        ...(idempotencyKey === undefined ? {} : { idempotencyKey }),
      })
      const follow = `follow progress at GET /api/v1/prompts/import/${batch._id}`
      reply.code(202)
      if (replayed) {
        return {
          batchId: batch._id,
          message: `Already received as this batch (${batch.status}); nothing new is created; ${follow}`,
        }
      }
      const bad = batch.errors.length
      return {
        batchId: batch._id,
        message:
          `Importing ${batch.total} row${batch.total === 1 ? '' : 's'}` +
          (bad > 0 ? ` (${bad} with errors, reported in the batch status)` : '') +
          `; ${follow}`,
      }
    })
  })

  route(app, API_ROUTES.getImportBatch, async (request) => {
    return importer.get(requireOrganization(request), request.params.batchId)
  })
}
