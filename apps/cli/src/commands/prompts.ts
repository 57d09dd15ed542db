import { readFileSync } from 'node:fs'
import { basename } from 'node:path'
import type { RenderedPrompt } from '@pm/client'
import { ENVIRONMENTS, type EnvironmentName, type ImportBatch } from '@pm/contracts'
import {
  CommandError,
  type Context,
  clientFor,
  nonEmpty,
  parse,
  positiveInt,
  required,
  table,
  UsageError,
} from '../context.ts'
import { ProgressBar } from '../progress.ts'

function environment(text: string | undefined): EnvironmentName | undefined {
  if (text === undefined) return undefined
  if (!(ENVIRONMENTS as readonly string[]).includes(text)) {
    throw new UsageError(`the environment is ${ENVIRONMENTS.join(' or ')}`)
  }
  return text as EnvironmentName
}

const PROMPTS_USAGE = 'pm prompts list|get|create|update|delete'

/** `pm prompts list|get|create|update|delete`. */
export async function promptsCommand(ctx: Context, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  // Writing commands live in prompts-edit.ts.
  if (sub === 'create' || sub === 'update' || sub === 'delete') {
    const edit = await import('./prompts-edit.ts')
    if (sub === 'create') return edit.createPrompt(ctx, rest)
    return sub === 'update' ? edit.updatePrompt(ctx, rest) : edit.deletePrompt(ctx, rest)
  }
  if (sub !== 'list' && sub !== 'get') {
    throw new UsageError(sub ? `unknown subcommand "prompts ${sub}": ${PROMPTS_USAGE}` : PROMPTS_USAGE)
  }
  const { values, positionals } = parse(rest, {
    search: { type: 'string' },
    tags: { type: 'string' },
    visibility: { type: 'string' },
    page: { type: 'string' },
    limit: { type: 'string' },
    slug: { type: 'string' },
  })
  const client = await clientFor(ctx, 'any')
  if (sub === 'list') {
    const visibility = values.visibility
    if (
      visibility !== undefined &&
      visibility !== 'all' &&
      visibility !== 'public' &&
      visibility !== 'private'
    ) {
      throw new UsageError('--visibility is all, public or private')
    }
    const list = await client.api.listPrompts({
      query: {
        search: values.search,
        tags: values.tags,
        visibility,
        page: positiveInt(values.page, '--page'),
        limit: positiveInt(values.limit, '--limit'),
      },
    })
    const { pagination: p, summary: s } = list
    ctx.print(
      `${table(
        ['ID', 'NAME', 'SLUG', 'VERSIONS', 'PUBLIC', 'TAGS'],
        list.prompts.map((x) => [
          x._id,
          x.name,
          x.slug,
          String(x.versionCount),
          x.isPublic ? 'yes' : 'no',
          x.tags.join(','),
        ]),
      )}\npage ${p.page}/${Math.max(1, p.totalPages)} · ${p.total} matching · workspace: ${s.total} prompts, ${s.published} published, ${s.public} public`,
      list,
    )
    return 0
  }
  if (sub === 'get') {
    const id = nonEmpty(positionals[0], '<promptId>')
    const slug = nonEmpty(values.slug, '--slug')
    if ((id === undefined) === (slug === undefined)) {
      throw new UsageError('pm prompts get <promptId> | --slug <slug> (one of the two)')
    }
    const prompt =
      slug !== undefined
        ? await client.api.getPromptBySlug({ params: { slug } })
        : await client.api.getPrompt({ params: { id: id ?? '' } })
    ctx.print(
      [
        `${prompt.name} (${prompt._id}), slug ${prompt.slug}, ${prompt.versionCount} version(s), ${prompt.isPublic ? 'public' : 'private'}`,
        `variables: ${prompt.variables.map((v) => `${v.name}${v.required ? '' : '?'}`).join(', ') || '(none)'}`,
        '--- draft template ---',
        prompt.template,
      ].join('\n'),
      prompt,
    )
    return 0
  }
  return 2
}

/** `pm publish <promptId>`: the draft becomes the next version (user session). */
export async function publishCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { changelog: { type: 'string' } })
  const id = positionals[0]
  if (!id) throw new UsageError('pm publish <promptId> [--changelog <text>]')
  const version = await (await clientFor(ctx, 'user')).api.publishPrompt({
    params: { id },
    body: values.changelog ? { changeLog: values.changelog } : {},
  })
  ctx.print(`Published version ${version.version} (${version._id}) of ${id}.`, version)
  return 0
}

/** `pm promote <promptId> <env>`: pin a published version (by number or id). */
export async function promoteCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    version: { type: 'string' },
    'version-id': { type: 'string' },
  })
  const [id, envText] = positionals
  const env = environment(envText)
  if (!id || !env)
    throw new UsageError('pm promote <promptId> <preview|production> (--version <n> | --version-id <id>)')
  const number = positiveInt(values.version, '--version')
  if ((number === undefined) === (values['version-id'] === undefined)) {
    throw new UsageError('give one of --version <n> or --version-id <id>')
  }
  const client = await clientFor(ctx, 'any')
  let versionId = values['version-id']
  if (number !== undefined) {
    const { versions } = await client.api.listVersions({ params: { id } })
    versionId = versions.find((v) => v.version === number)?._id
    if (!versionId) {
      const known = versions.map((v) => v.version).join(', ')
      throw new CommandError(
        'NOT_FOUND',
        `prompt ${id} has no version ${number} (its versions: ${known || 'none, publish one first'})`,
      )
    }
  }
  const pin = await client.api.promoteVersion({
    params: { id, env },
    body: { versionId: required(versionId, '--version-id') },
  })
  ctx.print(`${env} of ${id} now serves version ${pin.version} (${pin.versionId}).`, pin)
  return 0
}

/** `completed` even with bad rows; `failed` when the writer died (the rows it left are errors). */
const FINISHED = new Set<ImportBatch['status']>(['completed', 'failed'])

/** `pm import <file.csv>`: upload, then follow the batch with a progress bar. */
export async function importCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    wait: { type: 'boolean', default: true },
    'no-wait': { type: 'boolean', default: false },
    interval: { type: 'string' },
  })
  const file = positionals[0]
  if (!file) throw new UsageError('pm import <file.csv> [--no-wait]')
  // Checked before the upload: a usage error means nothing was done.
  const interval = positiveInt(values.interval, '--interval') ?? 250
  const client = await clientFor(ctx, 'user')
  const accepted = await client.api.importPrompts({
    body: { file: readFileSync(file), filename: basename(file) },
  })
  if (values['no-wait'] || !values.wait) {
    ctx.print(`Import ${accepted.batchId} accepted: ${accepted.message}`, accepted)
    return 0
  }
  const bar = new ProgressBar(ctx.io.stderr)
  let batch = await client.api.getImportBatch({ params: { batchId: accepted.batchId } })
  for (;;) {
    bar.update(batch.created + batch.failed, batch.total, `created ${batch.created}, failed ${batch.failed}`)
    if (FINISHED.has(batch.status)) break
    await new Promise((resolve) => setTimeout(resolve, interval))
    batch = await client.api.getImportBatch({ params: { batchId: accepted.batchId } })
  }
  bar.finish()
  const errors = batch.errors.map((e) => `  row ${e.row}: ${e.message}`)
  ctx.print(
    [
      `Import ${accepted.batchId} ${batch.status}: ${batch.created} created, ${batch.failed} failed of ${batch.total}.`,
      ...errors,
    ].join('\n'),
    batch,
  )
  return batch.failed > 0 || batch.status === 'failed' ? 1 : 0
}

function parseVars(pairs: string[], json: string | undefined): Record<string, unknown> {
  let vars: Record<string, unknown> = {}
  if (json) {
    try {
      const parsed: unknown = JSON.parse(json)
      if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed)) throw new Error('not an object')
      vars = parsed as Record<string, unknown>
    } catch {
      throw new UsageError('--vars-json must be a JSON object')
    }
  }
  for (const pair of pairs) {
    const at = pair.indexOf('=')
    if (at < 1) {
      throw new UsageError(
        at === 0
          ? `--var "${pair}" has no name before "=": write --var name=value`
          : `--var "${pair}" has no "=": write --var ${pair}=<value> (name=value)`,
      )
    }
    vars[pair.slice(0, at)] = pair.slice(at + 1)
  }
  return vars
}

/**
 * `pm invoke <promptId>` or `pm invoke --slug <slug>`: prints the rendered text (or the whole
 * result, with a chat prompt's renderedMessages, the config and the `references` it included,
 * with --json); the prompts a template included are named on stderr.
 */
export async function invokeCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    var: { type: 'string', multiple: true },
    'vars-json': { type: 'string' },
    version: { type: 'string' },
    env: { type: 'string' },
    slug: { type: 'string' },
  })
  const id = nonEmpty(positionals[0], '<promptId>')
  const slug = nonEmpty(values.slug, '--slug')
  if ((id === undefined) === (slug === undefined)) {
    throw new UsageError('pm invoke <promptId> | --slug <slug> [--var name=value ...]')
  }
  const variables = parseVars(values.var ?? [], values['vars-json'])
  const options = {
    version: positiveInt(values.version, '--version'),
    env: environment(values.env),
    cache: false,
  }
  const client = await clientFor(ctx, 'any')
  const result =
    slug !== undefined
      ? await client.invokeBySlug(slug, variables, options)
      : await client.invoke(id ?? '', variables, options)
  const { source: _source, ...data } = result
  ctx.print(result.renderedContent, data)
  // What the template included, on stderr: stdout stays the rendered text alone (for pipes).
  if (!ctx.json && result.references && result.references.length > 0) {
    ctx.io.stderr.write(`included: ${describeReferences(result.references)}\n`)
  }
  return 0
}

/** `header v1 (latest), policy v3 (production)`: which version of each included prompt rendered, and how it was named. */
export function describeReferences(references: NonNullable<RenderedPrompt['references']>): string {
  return references.map((r) => `${r.slug} v${r.version} (${r.via})`).join(', ')
}
