import {
  AppError,
  type AuditEntry,
  type Connection,
  type CreateConnectionRequest,
  type Provider,
  type UpdateConnectionRequest,
} from '@pm/contracts'
import { type AuditContext, auditEntry, newId, type SecretBox } from '@pm/kit'
import type { ConnectionPatch, ConnectionRecord, RunStore } from '../store/types.ts'
import type { Egress } from './egress.ts'

/** A connection opened for a call: the key in clear, only in memory. */
export interface OpenConnection {
  _id: string
  provider: Provider
  baseUrl: string | null
  apiKey: string
  headers: Record<string, string>
  models: string[]
  /** Changes whenever the connection does (its updatedAt): a cached client of an older one is not used. */
  revision: string
}

/** Keys shorter than this get no hint: their last 4 characters would be a quarter or more of them. */
export const KEY_HINT_MIN_LENGTH = 16

/**
 * The last 4 characters: enough to tell keys apart, never enough to use one. A short key (a
 * placeholder such as `ollama`, a weak self-hosted one) gets none (''): 4 of its characters, or
 * all of them, would be a large part of the secret.
 */
export const keyHint = (apiKey: string): string =>
  apiKey.length >= KEY_HINT_MIN_LENGTH ? apiKey.slice(-4) : ''

export function toConnection(r: ConnectionRecord): Connection {
  return {
    _id: r._id,
    organizationId: r.organizationId,
    name: r.name,
    provider: r.provider,
    baseUrl: r.baseUrl,
    // Stored before short keys got no hint: one under 4 characters is a whole key.
    keyHint: r.keyHint.length < 4 ? '' : r.keyHint,
    models: r.models,
    headerNames: r.headerNames,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  }
}

/**
 * How a connection is named in the audit log: its name, its provider and its base URL's host
 * only. Never the key or a header value (they are secrets), nor the URL's path (a gateway's path
 * may carry a deployment or tenant token).
 */
function describe(c: Pick<ConnectionRecord, 'name' | 'provider' | 'baseUrl'>): string {
  return `the ${c.provider} connection "${c.name}"${c.baseUrl ? ` to ${hostOf(c.baseUrl)}` : ''}`
}

function hostOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return 'an invalid URL'
  }
}

export interface ConnectionsDeps {
  store: RunStore
  secrets: SecretBox
  egress: Egress
  maxPerOrganization: number
  /** Told when audit entries were written (the relay publishes them at once). */
  onAudit?: () => void
}

/** Opened secrets kept, at most (one entry per connection). */
const OPENED_MAX = 1_000

/** Provider connections of an organization: the key and header values sealed, bound to the record. */
export class Connections {
  private readonly deps: ConnectionsDeps
  /**
   * The key and headers of a connection, opened once per sealed value: every call still reads the
   * record (a change or a deletion on any replica counts at once), but opening them (AES-GCM, a
   * key object, JSON) is done again only when they changed. A removed connection's entry is
   * dropped at once.
   */
  private readonly opened = new Map<
    string,
    { revision: string; apiKey: string; headers: Record<string, string> }
  >()

  constructor(deps: ConnectionsDeps) {
    this.deps = deps
  }

  /** The change's entry, or none without a context (DESIGN section 15). */
  private audit(
    ctx: AuditContext | undefined,
    organizationId: string,
    action: 'connection.created' | 'connection.updated' | 'connection.deleted',
    id: string,
    summary: string,
  ): AuditEntry[] {
    return ctx ? [auditEntry(ctx, organizationId, action, { type: 'connection', id }, summary)] : []
  }

  private audited(entries: readonly AuditEntry[]): void {
    if (entries.length > 0) this.deps.onAudit?.()
  }

  async list(organizationId: string): Promise<Connection[]> {
    return (await this.deps.store.listConnections(organizationId)).map(toConnection)
  }

  async create(
    organizationId: string,
    body: CreateConnectionRequest,
    audit?: AuditContext,
  ): Promise<Connection> {
    const { store, secrets, egress } = this.deps
    if (body.provider === 'openai-compatible' && !body.baseUrl) {
      throw new AppError('VALIDATION_ERROR', 'an openai-compatible connection needs baseUrl', [
        { path: '/body/baseUrl', message: 'required for openai-compatible' },
      ])
    }
    const baseUrl = body.baseUrl ? await egress.checkBaseUrl(body.baseUrl) : null
    const id = newId()
    const now = new Date().toISOString()
    const headers = body.headers ?? {}
    const record: ConnectionRecord = {
      _id: id,
      organizationId,
      name: body.name.trim(),
      provider: body.provider,
      baseUrl,
      sealedKey: secrets.seal(body.apiKey, id),
      keyHint: keyHint(body.apiKey),
      models: body.models ?? [],
      sealedHeaders: Object.keys(headers).length > 0 ? secrets.seal(JSON.stringify(headers), id) : null,
      headerNames: Object.keys(headers),
      createdAt: now,
      updatedAt: now,
    }
    const entries = this.audit(audit, organizationId, 'connection.created', id, `created ${describe(record)}`)
    // The bound is checked in the insert's own transaction: creates at once do not pass it together.
    if (!(await store.insertConnection(record, this.deps.maxPerOrganization, entries))) {
      throw new AppError(
        'CONFLICT',
        `an organization holds at most ${this.deps.maxPerOrganization} connections`,
      )
    }
    this.audited(entries)
    return toConnection(record)
  }

  async update(
    organizationId: string,
    id: string,
    body: UpdateConnectionRequest,
    audit?: AuditContext,
  ): Promise<Connection> {
    const { store, secrets, egress } = this.deps
    const existing = await store.getConnection(organizationId, id)
    if (!existing) throw new AppError('NOT_FOUND', 'connection not found')
    const patch: ConnectionPatch = { updatedAt: new Date().toISOString() }
    if (body.name !== undefined) patch.name = body.name.trim()
    if (body.baseUrl !== undefined) {
      if (body.baseUrl === null && existing.provider === 'openai-compatible') {
        throw new AppError('VALIDATION_ERROR', 'an openai-compatible connection needs baseUrl', [
          { path: '/body/baseUrl', message: 'required for openai-compatible' },
        ])
      }
      patch.baseUrl = body.baseUrl === null ? null : await egress.checkBaseUrl(body.baseUrl)
    }
    if (body.apiKey !== undefined) {
      patch.sealedKey = secrets.seal(body.apiKey, id)
      patch.keyHint = keyHint(body.apiKey)
    }
    if (body.models !== undefined) patch.models = body.models
    if (body.headers !== undefined) {
      patch.sealedHeaders =
        Object.keys(body.headers).length > 0 ? secrets.seal(JSON.stringify(body.headers), id) : null
      patch.headerNames = Object.keys(body.headers)
    }
    // What changed, by field: the key and the header values are named as replaced, never shown.
    const said: string[] = []
    if (patch.name !== undefined && patch.name !== existing.name) said.push(`renamed from "${existing.name}"`)
    if (patch.baseUrl !== undefined)
      said.push(patch.baseUrl === null ? 'base URL removed' : `base URL ${hostOf(patch.baseUrl)}`)
    if (patch.sealedKey !== undefined) said.push('API key replaced')
    if (patch.models !== undefined) said.push(`models ${patch.models.join(', ') || 'none'}`)
    if (patch.headerNames !== undefined)
      said.push(`extra headers replaced (${patch.headerNames.join(', ') || 'none'})`)
    const entries = this.audit(
      audit,
      organizationId,
      'connection.updated',
      id,
      `updated ${describe({ ...existing, name: patch.name ?? existing.name })}${said.length > 0 ? `: ${said.join('; ')}` : ''}`,
    )
    const updated = await store.updateConnection(organizationId, id, patch, entries)
    if (!updated) throw new AppError('NOT_FOUND', 'connection not found')
    this.audited(entries)
    return toConnection(updated)
  }

  async remove(
    organizationId: string,
    id: string,
    audit?: AuditContext,
  ): Promise<{ _id: string; deleted: true }> {
    this.opened.delete(id)
    const existing = await this.deps.store.getConnection(organizationId, id)
    if (!existing) throw new AppError('NOT_FOUND', 'connection not found')
    const entries = this.audit(
      audit,
      organizationId,
      'connection.deleted',
      id,
      `deleted ${describe(existing)}`,
    )
    if (!(await this.deps.store.deleteConnection(organizationId, id, entries)))
      throw new AppError('NOT_FOUND', 'connection not found')
    this.audited(entries)
    return { _id: id, deleted: true }
  }

  /** The connection with its secrets opened, for one call; 404 when the organization has none by that id. */
  async open(organizationId: string, id: string): Promise<OpenConnection> {
    const r = await this.deps.store.getConnection(organizationId, id)
    if (!r) {
      throw new AppError('NOT_FOUND', 'connection not found', [
        { path: '/body/connectionId', message: 'no such connection' },
      ])
    }
    // Sealing draws a new IV each time: a new key or headers always make new sealed values.
    const revision = `${r.sealedKey}:${r.sealedHeaders ?? ''}`
    let secret = this.opened.get(r._id)
    if (secret?.revision !== revision) {
      const { secrets } = this.deps
      secret = {
        revision,
        apiKey: secrets.open(r.sealedKey, r._id),
        headers: r.sealedHeaders
          ? (JSON.parse(secrets.open(r.sealedHeaders, r._id)) as Record<string, string>)
          : {},
      }
      if (this.opened.size >= OPENED_MAX) this.opened.clear()
      this.opened.set(r._id, secret)
    }
    return {
      _id: r._id,
      provider: r.provider,
      baseUrl: r.baseUrl,
      apiKey: secret.apiKey,
      headers: { ...secret.headers },
      models: r.models,
      revision: r.updatedAt,
    }
  }
}
