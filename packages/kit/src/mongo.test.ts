import { BSON, DBRef } from 'mongodb'
import { describe, expect, it } from 'vitest'
import { fromMongoJson, toMongoJson } from './mongo.ts'

/** A write and a read through the driver's own BSON (what a MongoDB round trip does to a document). */
const roundTrip = (doc: Record<string, unknown>) => BSON.deserialize(BSON.serialize(doc))

describe('user JSON on MongoDB (toMongoJson, fromMongoJson)', () => {
  const schema = { $ref: '#/defs/a.b', $id: 'args', type: 'object' }

  it('the driver reads an object whose only $-keys are $ref/$id back as a DBRef, its $ref split', () => {
    const back = roundTrip({ config: { tool: schema } })
    expect(back.config.tool).toBeInstanceOf(DBRef)
    expect(JSON.parse(JSON.stringify(back.config.tool))).toMatchObject({ $ref: 'b', $db: '#/defs/a' })
  })

  it('stores such objects as their entries and reads them back as written', () => {
    const values: unknown[] = [
      { tool: schema },
      { $ref: 'x', $id: { nested: [{ $ref: 'y', $id: 1, $db: 'z' }] } },
      { $pmEntries: [['a', 1]] },
      { $pmEntries: 1, other: true },
      [{ $id: 'only' }, { $db: 'only' }],
      { $schema: 'https://json-schema.org/draft/2020-12/schema', $ref: '#/a', $id: 'b' },
      JSON.parse('{"__proto__": {"$ref": "p", "$id": "q"}}'),
    ]
    for (const value of values) {
      const stored = roundTrip({ value: toMongoJson(value) }).value
      const read = fromMongoJson(stored)
      expect(read).toEqual(value)
      expect(JSON.stringify(read)).toBe(JSON.stringify(value))
    }
  })

  it('leaves every other object as it is, so documents written before read the same', () => {
    const plain = {
      model: 'm',
      $schema: 'https://json-schema.org/draft/2020-12/schema',
      'a.b': { $ref: '#/x', $defs: {} },
      list: [1, 'two', null, { three: 3 }],
    }
    expect(toMongoJson(plain)).toEqual(plain)
    expect(fromMongoJson(roundTrip({ plain }).plain)).toEqual(plain)
  })

  it('reads a DBRef stored before as its JSON', () => {
    expect(fromMongoJson({ v: new DBRef('c', 'id' as never, undefined, { n: 1 }) })).toEqual({
      v: { $ref: 'c', $id: 'id', n: 1 },
    })
  })
})
