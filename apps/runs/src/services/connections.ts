import {
  AppError,
  type Connection,
  type CreateConnectionRequest,
  type Provider,
  type UpdateConnectionRequest,
} from '@pm/contracts'
import { newId, type SecretBox } from '@pm/kit'
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

/** The last 4 characters: enough to tell keys apart, never enough to use one. */
export const keyHint = (apiKey: string): string => apiKey.slice(-4)

export function toConnection(r: ConnectionRecord): Connection {
  return {
    _id: r._id,
    organizationId: r.organizationId,
    name: r.name,
    provider: r.provider,
    baseUrl: r.baseUrl,
    keyHint: r.keyHint,
    models: r.models,
    headerNames: r.headerNames,
    createdAt: r.createdAt,
    updatedAt: r.updatedAt,
  }
}

/** Opened secrets kept, at most (one entry per connection). */
const OPENED_MAX = 1_000

/** Provider connections of an organization: the key and header values sealed, bound to the record. */
export class Connections {
  private readonly deps: { store: RunStore; secrets: SecretBox; egress: Egress; maxPerOrganization: number }
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

  constructor(deps: { store: RunStore; secrets: SecretBox; egress: Egress; maxPerOrganization: number }) {
    this.deps = deps
  }

  async list(organizationId: string): Promise<Connection[]> {
    return (await this.deps.store.listConnections(organizationId)).map(toConnection)
  }

  async create(organizationId: string, body: CreateConnectionRequest): Promise<Connection> {
    const { store, secrets, egress } = this.deps
    if (body.provider === 'openai-compatible' && !body.baseUrl) {
      throw new AppError('VALIDATION_ERROR', 'an openai-compatible connection needs baseUrl', [
        { path: '/body/baseUrl', message: 'required for openai-compatible' },
      ])
    }
    const baseUrl = body.baseUrl ? await egress.checkBaseUrl(body.baseUrl) : null
    if ((await store.countConnections(organizationId)) >= this.deps.maxPerOrganization) {
      throw new AppError(
        'CONFLICT',
        `an organization holds at most ${this.deps.maxPerOrganization} connections`,
      )
    }
    const id = newId()
    const now = new Date().toISOString()
    const headers = body.headers ?? {}
    const record: ConnectionRecord = {
      _id: id,
      organizationId,
      name: body.name,
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
    await store.insertConnection(record)
    return toConnection(record)
  }

  async update(organizationId: string, id: string, body: UpdateConnectionRequest): Promise<Connection> {
    const { store, secrets, egress } = this.deps
    const existing = await store.getConnection(organizationId, id)
    if (!existing) throw new AppError('NOT_FOUND', 'connection not found')
    const patch: ConnectionPatch = { updatedAt: new Date().toISOString() }
    if (body.name !== undefined) patch.name = body.name
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
    const updated = await store.updateConnection(organizationId, id, patch)
    if (!updated) throw new AppError('NOT_FOUND', 'connection not found')
    return toConnection(updated)
  }

  async remove(organizationId: string, id: string): Promise<{ _id: string; deleted: true }> {
    this.opened.delete(id)
    if (!(await this.deps.store.deleteConnection(organizationId, id)))
      throw new AppError('NOT_FOUND', 'connection not found')
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
