import { type Static, Type } from '@sinclair/typebox'
import { ObjectId } from './common.ts'

/**
 * Composition (DESIGN section 12): what invoke and inject report about the prompts a template
 * included, the dependents of a prompt, and the `force` of delete and of a change of slug.
 */

export const REFERENCE_VIAS = ['latest', 'preview', 'production', 'version'] as const

/** One included prompt, as rendered. */
export const PromptReference = Type.Object(
  {
    slug: Type.String(),
    promptId: ObjectId,
    versionId: ObjectId,
    version: Type.Integer(),
    /** How the reference picked the version: `{{> s}}` latest, `@preview`, `@production`, `@v3` version. */
    via: Type.Union(REFERENCE_VIAS.map((v) => Type.Literal(v))),
  },
  { $id: 'PromptReference', additionalProperties: false },
)
export type PromptReference = Static<typeof PromptReference>

/** A prompt that includes another one, and where: its draft, its current version, or both. */
export const PromptDependent = Type.Object(
  {
    promptId: ObjectId,
    slug: Type.String(),
    name: Type.String(),
    in: Type.Array(Type.Union([Type.Literal('draft'), Type.Literal('current')])),
  },
  { $id: 'PromptDependent', additionalProperties: false },
)
export type PromptDependent = Static<typeof PromptDependent>

export const PromptDependents = Type.Object(
  { dependents: Type.Array(Type.Ref(PromptDependent)) },
  { $id: 'PromptDependents', additionalProperties: false },
)
export type PromptDependents = Static<typeof PromptDependents>

/** Delete's query: `force=true` deletes a prompt that others include. */
export const DeletePromptQuery = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    /** Only the exact string "true" forces. */
    force: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  },
  { $id: 'DeletePromptQuery', additionalProperties: false },
)

/** Update's query: `force=true` changes the slug of a prompt that others include. */
export const UpdatePromptQuery = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    /** Only the exact string "true" forces. */
    force: Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')])),
  },
  { $id: 'UpdatePromptQuery', additionalProperties: false },
)
