import type { Prompt, PublicPrompt } from '@pm/contracts'
import type { PromptRecord, VersionRecord } from '../store/types.ts'
import { contentFields } from './content.ts'

/** The API shape of a prompt (environments are served by their own route). */
export function publicPrompt(p: PromptRecord): Prompt {
  const { environments: _environments, ...rest } = p
  return rest
}

/** The public catalog's view: metadata of the prompt, content of its current version. */
export function catalogEntry(p: PromptRecord, v: VersionRecord): PublicPrompt {
  return {
    _id: p._id,
    name: p.name,
    slug: p.slug,
    description: p.description,
    tags: p.tags,
    type: v.type,
    template: v.template,
    variables: v.variables,
    ...contentFields(v),
    versionId: v._id,
    version: v.version,
    publishedAt: v.publishedAt,
    createdAt: p.createdAt,
  }
}
