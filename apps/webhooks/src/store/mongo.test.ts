import { createRequire } from 'node:module'
import {
  type BulkWriteOperationError,
  type BulkWriteResult,
  type MongoClient,
  MongoBulkWriteError,
  MongoNetworkError,
  MongoServerSelectionError,
  type WriteConcernError,
  type WriteConcernErrorData,
  type WriteError,
} from 'mongodb'
import { describe, expect, it } from 'vitest'
import { MongoWebhookStore } from './mongo.ts'
import type { DeliveryRecord } from './types.ts'

/**
 * Issue 14, MongoDB store: createDeliveries counted a MongoBulkWriteError with no write errors
 * (network error, server selection timeout, election, write-concern error) as "all duplicates",
 * returned 0, and the event was acknowledged with its deliveries lost. The errors below are
 * built the way the driver builds them (mongodb src/bulk/common.ts: a driver error with the
 * partial result; a write-concern error; write errors, then a write-concern error beside them).
 */

type RawResult = {
  ok: number
  writeErrors: WriteError[]
  writeConcernErrors: WriteConcernError[]
  insertedIds: { index: number; _id: string }[]
  nInserted: number
  nUpserted: number
  nMatched: number
  nModified: number
  nRemoved: number
  upserted: unknown[]
}

// The driver's own classes, which it does not export (their constructors are internal).
const driver = createRequire(import.meta.url)('mongodb/lib/bulk/common.js') as {
  BulkWriteResult: new (raw: RawResult, ordered: boolean) => BulkWriteResult
  WriteError: new (err: BulkWriteOperationError) => WriteError
  WriteConcernError: new (err: WriteConcernErrorData) => WriteConcernError
}
const Result = driver.BulkWriteResult
const WriteErrorClass = driver.WriteError
const WriteConcernErrorClass = driver.WriteConcernError

function result(
  inserted: number,
  writeErrors: WriteError[] = [],
  writeConcernErrors: WriteConcernError[] = [],
) {
  return new Result(
    {
      ok: 1,
      writeErrors,
      writeConcernErrors,
      insertedIds: [],
      nInserted: inserted,
      nUpserted: 0,
      nMatched: 0,
      nModified: 0,
      nRemoved: 0,
      upserted: [],
    },
    false,
  )
}

// What a server selection timeout carries: the topology the driver saw (none here).
const TOPOLOGY = {} as ConstructorParameters<typeof MongoServerSelectionError>[1]

const duplicate = (index: number) =>
  new WriteErrorClass({ code: 11000, index, errmsg: 'E11000 duplicate key error', errInfo: {}, op: {} })

function storeFailingWith(error: unknown): MongoWebhookStore {
  const collection = {
    insertMany: async () => {
      throw error
    },
  }
  const client = { db: () => ({ collection: () => collection }) } as unknown as MongoClient
  return new MongoWebhookStore(client, 'test', false)
}

const deliveries = (n: number): DeliveryRecord[] =>
  Array.from({ length: n }, (_, i) => ({ _id: `d${i}` }) as unknown as DeliveryRecord)

describe('MongoWebhookStore.createDeliveries', () => {
  it.each([
    [
      'a network error (no write errors)',
      new MongoBulkWriteError(new MongoNetworkError('connection reset'), result(0)),
    ],
    [
      'a server selection timeout (no write errors)',
      new MongoBulkWriteError(new MongoServerSelectionError('no primary', TOPOLOGY), result(1)),
    ],
    [
      'a write-concern error alone',
      new MongoBulkWriteError(
        new WriteConcernErrorClass({ code: 64, errmsg: 'waiting for replication timed out' }),
        result(3),
      ),
    ],
    [
      'duplicates beside a write-concern error',
      new MongoBulkWriteError(
        { message: 'E11000', code: 11000, writeErrors: [duplicate(0)] },
        result(2, [duplicate(0)], [new WriteConcernErrorClass({ code: 91, errmsg: 'shutdown in progress' })]),
      ),
    ],
    [
      'a write error that is not a duplicate',
      new MongoBulkWriteError(
        {
          message: 'document failed validation',
          code: 121,
          writeErrors: [
            duplicate(0),
            new WriteErrorClass({ code: 121, index: 1, errmsg: 'invalid', errInfo: {}, op: {} }),
          ],
        },
        result(1, [duplicate(0)]),
      ),
    ],
    [
      'duplicates that do not account for every document',
      new MongoBulkWriteError(
        { message: 'E11000', code: 11000, writeErrors: [duplicate(0)] },
        result(1, [duplicate(0)]),
      ),
    ],
  ])('rethrows %s', async (_label, error) => {
    await expect(storeFailingWith(error).createDeliveries(deliveries(3))).rejects.toBe(error)
  })

  it('counts the inserted ones when the only failures are duplicates', async () => {
    const error = new MongoBulkWriteError(
      { message: 'E11000', code: 11000, writeErrors: [duplicate(0), duplicate(2)] },
      result(1, [duplicate(0), duplicate(2)]),
    )
    await expect(storeFailingWith(error).createDeliveries(deliveries(3))).resolves.toBe(1)
  })
})
