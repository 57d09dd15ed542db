import { type Static, type TSchema, Type } from '@sinclair/typebox'

/** 24-hex ObjectId strings, in every store (DESIGN section 3). */
export const ObjectId = Type.String({ pattern: '^[0-9a-f]{24}$' })
export type ObjectId = Static<typeof ObjectId>

export const Timestamp = Type.String({ format: 'date-time' })

export const IdParams = Type.Object({ id: ObjectId }, { additionalProperties: false })

export const PAGE_DEFAULT = 20
export const PAGE_MAX = 100

export const PageQuery = {
  page: Type.Integer({ minimum: 1, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: PAGE_MAX, default: PAGE_DEFAULT }),
}

export const Pagination = Type.Object(
  {
    page: Type.Integer(),
    limit: Type.Integer(),
    total: Type.Integer(),
    totalPages: Type.Integer(),
    hasNextPage: Type.Boolean(),
  },
  { $id: 'Pagination' },
)
export type Pagination = Static<typeof Pagination>

export function pagination(page: number, limit: number, total: number): Pagination {
  const totalPages = Math.ceil(total / limit)
  return { page, limit, total, totalPages, hasNextPage: page < totalPages }
}

/** Nullable helper: JSON Schema `anyOf [T, null]`. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])
