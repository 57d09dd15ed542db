import type { AuditEntry, Provider, RunRecord } from '@pm/contracts'
import type { AuditOutbox } from '@pm/kit'

/** A provider connection as stored: the key and the extra headers sealed (SecretBox), bound to the record's id. */
export interface ConnectionRecord {
  _id: string
  organizationId: string
  name: string
  provider: Provider
  baseUrl: string | null
  /** `SecretBox.seal(apiKey, _id)`: never the clear key. */
  sealedKey: string
  keyHint: string
  models: string[]
  /** `SecretBox.seal(JSON.stringify(headers), _id)`, or null without extra headers. */
  sealedHeaders: string | null
  headerNames: string[]
  createdAt: string
  updatedAt: string
}

export type ConnectionPatch = Partial<
  Pick<
    ConnectionRecord,
    'name' | 'baseUrl' | 'sealedKey' | 'keyHint' | 'models' | 'sealedHeaders' | 'headerNames'
  >
> & { updatedAt: string }

export interface Page<T> {
  items: T[]
  total: number
}

/**
 * What the runs service keeps: connections and the run log, in SQLite or MongoDB, and the audit
 * outbox of connection changes.
 */
export interface RunStore extends AuditOutbox {
  /**
   * `audit`: the change's audit entries (DESIGN section 15), written into the audit outbox in the
   * same transaction, and only when the change is made.
   */
  /**
   * Inserts the connection unless its organization holds `maxPerOrganization` already (false,
   * nothing written): the count and the insert are one transaction, so that creates at once do
   * not pass the bound together.
   */
  insertConnection(
    record: ConnectionRecord,
    maxPerOrganization: number,
    audit?: AuditEntry[],
  ): Promise<boolean>
  listConnections(organizationId: string): Promise<ConnectionRecord[]>
  getConnection(organizationId: string, id: string): Promise<ConnectionRecord | null>
  /** Null when the connection is not in the organization (and no entry is written). */
  updateConnection(
    organizationId: string,
    id: string,
    patch: ConnectionPatch,
    audit?: AuditEntry[],
  ): Promise<ConnectionRecord | null>
  /** False when the connection was not there (and no entry is written). */
  deleteConnection(organizationId: string, id: string, audit?: AuditEntry[]): Promise<boolean>
  insertRun(run: RunRecord): Promise<void>
  /** The prompt's runs in the organization, newest first. */
  listRuns(organizationId: string, promptId: string, page: number, limit: number): Promise<Page<RunRecord>>
  getRun(organizationId: string, id: string): Promise<RunRecord | null>
  /** Deletes runs created before `before` (ISO time); how many went. */
  deleteRunsBefore(before: string): Promise<number>
  /**
   * Every connection's sealed key and headers through `reseal` (null: leave as it is), written
   * back only where the row is still as read (compare-and-set: a replica or an update that got
   * there first wins). How many rows changed.
   */
  resealConnections(reseal: (id: string, stored: string) => string | null): Promise<number>
  check(): Promise<void>
  close(): Promise<void>
}
