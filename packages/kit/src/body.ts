import { AppError, CONFIG_MAX_DEPTH } from '@pm/contracts'
import sjson from 'secure-json-parse'

/**
 * How deeply a JSON body's objects and arrays may nest. Serializing a value thousands of levels
 * deep overflows the stack (render echoes the `variables` it was sent; a 10 KB body of `[[[...`
 * was a 500), so no route gets one. Twice the config bound: a config sits inside a body.
 */
export const JSON_MAX_DEPTH = 2 * CONFIG_MAX_DEPTH

/** Whether `value`'s objects and arrays nest deeper than `max` (a loop: no recursion to overflow). */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]]
  for (let next = stack.pop(); next; next = stack.pop()) {
    const [v, depth] = next
    if (v === null || typeof v !== 'object') continue
    if (depth + 1 > max) return true
    for (const child of Object.values(v)) stack.push([child, depth + 1])
  }
  return false
}

/** A JSON body refused for its depth (JSON_MAX_DEPTH), not its syntax. */
export class JsonTooDeepError extends Error {
  constructor() {
    super(`must not nest more than ${JSON_MAX_DEPTH} levels deep`)
  }
}

/** A JSON body refused for an object key holding U+0000, which no store takes (BSON refuses it). */
export class JsonNulKeyError extends Error {
  constructor() {
    super('must not have a key containing U+0000')
  }
}

/** Whether an object in `value` has a key containing U+0000 (a loop: no recursion to overflow). */
function hasNulKey(value: unknown): boolean {
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const v = stack.pop()
    if (v === null || typeof v !== 'object') continue
    if (!Array.isArray(v) && Object.keys(v).some((k) => k.includes('\u0000'))) return true
    for (const child of Object.values(v)) stack.push(child)
  }
  return false
}

/**
 * JSON text read by the body rule (below), wherever JSON comes from a client (a body, a CSV
 * cell): `__proto__` and `constructor.prototype` keys are a SyntaxError, nesting deeper than
 * JSON_MAX_DEPTH a JsonTooDeepError, a key containing U+0000 a JsonNulKeyError (SQLite kept
 * one, and MongoDB's driver refused it: a 500 in the distributed mode).
 */
export function parseJsonText(text: string): unknown {
  const value: unknown = sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' })
  if (nestsDeeperThan(value, JSON_MAX_DEPTH)) throw new JsonTooDeepError()
  // JSON writes U+0000 only as this escape: most bodies are not walked again.
  if (text.includes('\\u0000') && hasNulKey(value)) throw new JsonNulKeyError()
  return value
}

/**
 * The one rule by which the gateway and every service read a JSON body (issue 14, finding 4:
 * the gateway read bodies by a narrower rule than identity, so a body it skipped was still
 * accepted behind it, and the per-email login limit was bypassed):
 * - the media type is `application/json`, compared case-insensitively, parameters ignored;
 * - the text is UTF-8; a leading byte-order mark is dropped;
 * - `__proto__` and `constructor.prototype` keys are refused (as Fastify's own parser does);
 * - objects and arrays nest at most JSON_MAX_DEPTH levels deep;
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
    return parseJsonText(text)
  } catch (err) {
    if (err instanceof JsonTooDeepError || err instanceof JsonNulKeyError) {
      throw new AppError('VALIDATION_ERROR', `body ${err.message}`, [{ path: '/body', message: err.message }])
    }
    throw new AppError('VALIDATION_ERROR', 'body is not valid JSON', [
      { path: '/body', message: 'is not valid JSON' },
    ])
  }
}
