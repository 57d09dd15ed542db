import { type Static, Type } from '@sinclair/typebox'
import { ObjectId } from '../common.ts'
import { Slug } from '../prompts.ts'

/**
 * What the route catalogue needs for the prompt and render routes besides the schemas of
 * `prompts.ts`: path parameters, the workspace query, the public invoke body, the CSV upload
 * and the answer of a DELETE. The services declare these inline; the shapes here are the same.
 */

/** What a DELETE of a prompt or a webhook answers: the id of what is gone. */
export const Deleted = Type.Object({ _id: ObjectId, deleted: Type.Literal(true) }, { $id: 'Deleted' })
export type Deleted = Static<typeof Deleted>

export const PromptParams = Type.Object({ id: ObjectId }, { additionalProperties: false })
/** A prompt named by its slug (unique in the workspace). */
export const SlugParams = Type.Object({ slug: Slug }, { additionalProperties: false })
export const VersionParams = Type.Object(
  { id: ObjectId, versionId: ObjectId },
  { additionalProperties: false },
)
export const VariableParams = Type.Object(
  { id: ObjectId, name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
)

/** `organizationId` picks the workspace for a user token (DESIGN section 4). */
export const OrganizationQuery = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)

/** A route that takes no query parameter: any one given is a 400 VALIDATION_ERROR. */
export const NoQuery = Type.Object({}, { additionalProperties: false })

/** Body of a route that takes nothing but the workspace (restore); it may be left out. */
export const OrganizationBody = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { $id: 'OrganizationBody', additionalProperties: false },
)

export const PublicInvokeRequest = Type.Object(
  { variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
  { $id: 'PublicInvokeRequest', additionalProperties: false },
)
export type PublicInvokeRequest = Static<typeof PublicInvokeRequest>

/** The multipart body of a CSV import: one file field. */
export const ImportUpload = Type.Object(
  {
    file: Type.String({
      contentMediaType: 'text/csv',
      description:
        'columns name (required), template (required for text prompts), description, tags ' +
        '(separated by `;` or `,`), type (`text` or `chat`), messages (JSON list, chat prompts), ' +
        'config (a JSON object)',
    }),
  },
  { additionalProperties: false },
)
