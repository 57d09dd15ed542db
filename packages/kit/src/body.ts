import { AppError } from '@pm/contracts'
import sjson from 'secure-json-parse'

/**
 * The one rule by which the gateway and every service read a JSON body (issue 14, finding 4:
 * the gateway read bodies by a narrower rule than identity, so a body it skipped was still
 * accepted behind it, and the per-email login limit was bypassed):
 * - the media type is `application/json`, compared case-insensitively, parameters ignored;
 * - the text is UTF-8; a leading byte-order mark is dropped;
 * - `__proto__` and `constructor.prototype` keys are refused (as Fastify's own parser does);
 * - an empty or malformed body is a 400 VALIDATION_ERROR.
 */
export function isJsonMediaType(contentType: unknown): boolean {
  if (typeof contentType !== 'string') return false
  const semicolon = contentType.indexOf(';')
  const essence = (semicolon === -1 ? contentType : contentType.slice(0, semicolon)).trim()
  return essence.toLowerCase() === 'application/json'
}

export function parseJsonBody(raw: Buffer | string): unknown {
  const text = typeof raw === 'string' ? raw : raw.toString('utf8')
  if (text.length === 0 || (text.length === 1 && text.charCodeAt(0) === 0xfeff)) {
    throw new AppError('VALIDATION_ERROR', 'body is empty', [{ path: '/body', message: 'is empty' }])
  }
  try {
    // Drops a leading BOM itself.
    return sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  } catch {
    throw new AppError('VALIDATION_ERROR', 'body is not valid JSON', [
      { path: '/body', message: 'is not valid JSON' },
    ])
  }
}
