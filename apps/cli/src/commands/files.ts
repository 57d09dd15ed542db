import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import type { PromptClient } from '@pm/client'
import {
  FILE_EXTENSIONS,
  FILE_FORMATS,
  type FileFormat,
  type ImportPlan,
  type ImportPlanItem,
  SLUG_PATTERN,
} from '@pm/contracts'
import { createTwoFilesPatch } from 'diff'
import { CommandError, type Context, clientFor, parse, UsageError } from '../context.ts'

/**
 * Prompts as code (DESIGN section 16): `pm pull` writes the workspace's prompts as files,
 * `pm diff` shows local files against the server, `pm push` applies them. Pull remembers each
 * draft's revision in `<dir>/.pm-state.json`; push sends those revisions (`expect`), so a prompt
 * changed on the server since the pull fails the push (exit 1) before anything is written.
 */

const STATE_FILE = '.pm-state.json'
const SLUG = new RegExp(SLUG_PATTERN)
const PAGE = 100

interface State {
  format: FileFormat
  env: string | null
  /** By slug: the prompt and its draft's revision at the pull (or the last push). */
  prompts: Record<string, { id: string; revision: string; file: string }>
  /** The files the last pull wrote: the next pull removes those it does not write again. */
  pulled?: string[]
}

interface LocalFile {
  name: string
  bytes: Buffer
}

function formatFlag(value: string | undefined): FileFormat {
  if (value === undefined) return 'dotprompt'
  if (!(FILE_FORMATS as readonly string[]).includes(value))
    throw new UsageError(`--format must be one of ${FILE_FORMATS.join(', ')}`)
  return value as FileFormat
}

function formatOfFile(name: string): FileFormat | null {
  for (const format of FILE_FORMATS) if (name.endsWith(FILE_EXTENSIONS[format])) return format
  return null
}

function readState(dir: string): State | null {
  const path = join(dir, STATE_FILE)
  if (!existsSync(path)) return null
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as State
  } catch {
    throw new CommandError('BAD_STATE', `${path} is not valid JSON: delete it and pull again`)
  }
}

function writeState(dir: string, state: State): void {
  writeFileSync(join(dir, STATE_FILE), `${JSON.stringify(state, null, 2)}\n`)
}

/** The prompt files of the folder (not its state file), sorted by name. */
function localFiles(dir: string): LocalFile[] {
  if (!existsSync(dir))
    throw new UsageError(`no folder ${dir}: run "pm pull --dir ${dir}" first, or pass --dir`)
  return readdirSync(dir)
    .filter((name) => name !== STATE_FILE && formatOfFile(name) !== null)
    .sort()
    .map((name) => ({ name, bytes: readFileSync(join(dir, name)) }))
}

/** One request's share of the files: well inside the import's limits (500 files, 10 MiB, 2,000 prompts). */
const CHUNK_FILES = 200
const CHUNK_BYTES = 8 * 1024 * 1024

function chunks(files: LocalFile[]): LocalFile[][] {
  const out: LocalFile[][] = []
  let current: LocalFile[] = []
  let bytes = 0
  for (const file of files) {
    if (current.length > 0 && (current.length >= CHUNK_FILES || bytes + file.bytes.length > CHUNK_BYTES)) {
      out.push(current)
      current = []
      bytes = 0
    }
    current.push(file)
    bytes += file.bytes.length
  }
  if (current.length > 0) out.push(current)
  return out
}

/**
 * Sends the files to import-files (dry run or not), with the revisions to expect, in requests
 * of at most CHUNK_FILES files and CHUNK_BYTES; answers the plans merged into one.
 */
async function importFiles(
  client: PromptClient,
  files: LocalFile[],
  opts: { dryRun: boolean; publish: boolean; expect: Expect },
): Promise<ImportPlan> {
  if (files.length === 0) throw new UsageError('no prompt files (.prompt, .prompty, .json) in the folder')
  const merged: ImportPlan = {
    dryRun: opts.dryRun,
    publish: opts.publish,
    summary: { create: 0, update: 0, unchanged: 0, error: 0 },
    items: [],
  }
  for (const [first, ...more] of chunks(files)) {
    if (!first) continue
    const plan = await client.api.importFiles({
      query: { dryRun: opts.dryRun ? 'true' : 'false', publish: opts.publish ? 'true' : 'false' },
      body: {
        file: first.bytes,
        filename: first.name,
        more: more.map((f) => ({ file: f.bytes, filename: f.name })),
        fields: { expect: JSON.stringify(expectFor(opts.expect, [first, ...more])) },
      },
    })
    merged.items.push(...plan.items)
    for (const key of ['create', 'update', 'unchanged', 'error'] as const)
      merged.summary[key] += plan.summary[key]
  }
  return merged
}

/** The revisions to expect, by slug, each with the file it was pulled into. */
type Expect = Record<string, { revision: string; file: string }>

function expectOf(state: State | null): Expect {
  return Object.fromEntries(
    Object.entries(state?.prompts ?? {}).map(([slug, p]) => [slug, { revision: p.revision, file: p.file }]),
  )
}

/** The revisions of the prompts whose files are in this request (the field stays small). */
function expectFor(expect: Expect, files: LocalFile[]): Record<string, string> {
  const names = new Set(files.map((f) => f.name))
  return Object.fromEntries(
    Object.entries(expect).flatMap(([slug, e]) => (names.has(e.file) ? [[slug, e.revision]] : [])),
  )
}

function describeItem(item: ImportPlanItem): string {
  const what =
    item.action === 'update'
      ? `update (${(item.changes ?? []).join(', ')})`
      : item.action === 'error'
        ? `error: ${item.message ?? ''}`
        : item.action
  const published = item.publishedVersion === undefined ? '' : `, published v${item.publishedVersion}`
  const pinned = item.pinned?.length && item.action !== 'error' ? `, pin ${item.pinned.join(', ')}` : ''
  return `  ${item.file}: ${what}${published}${pinned}`
}

function describePlan(plan: ImportPlan, heading: string): string {
  const s = plan.summary
  return [
    `${heading}: ${s.create} to create, ${s.update} to update, ${s.unchanged} unchanged, ${s.error} with errors`,
    // An unchanged prompt is listed when it gets a pin (a Langfuse label).
    ...plan.items.filter((i) => i.action !== 'unchanged' || i.pinned?.length).map(describeItem),
  ].join('\n')
}

/**
 * The files an earlier pull wrote that this one did not (a prompt renamed, deleted, no longer
 * pinned, or pulled in another format): left there, the next push would create them again.
 * Only names pm recorded as its own, plain names of prompt files in the folder, are candidates.
 */
function stale(previous: State | null, written: Set<string>): string[] {
  if (!previous) return []
  // A state written before `pulled` existed: the files of its prompts.
  const recorded: unknown[] = Array.isArray(previous.pulled)
    ? previous.pulled
    : Object.values(previous.prompts ?? {}).map((p) => (p as { file?: unknown } | null)?.file)
  return [...new Set(recorded)]
    .filter(
      (name): name is string =>
        typeof name === 'string' &&
        basename(name) === name &&
        name !== STATE_FILE &&
        formatOfFile(name) !== null &&
        !written.has(name),
    )
    .sort()
}

/** `pm pull [--dir prompts] [--env production|preview | --draft] [--format dotprompt|prompty|json]` */
export async function pullCommand(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, {
    dir: { type: 'string', default: 'prompts' },
    env: { type: 'string' },
    draft: { type: 'boolean', default: false },
    format: { type: 'string' },
  })
  const dir = values.dir
  const format = formatFlag(values.format)
  const env = values.env
  if (env !== undefined && env !== 'production' && env !== 'preview')
    throw new UsageError('--env must be production or preview')
  if (env !== undefined && values.draft) throw new UsageError('give --env or --draft, not both')
  const client = await clientFor(ctx, 'user')
  mkdirSync(dir, { recursive: true })
  let previous: State | null
  try {
    previous = readState(dir)
  } catch {
    previous = null // a state pull is about to replace: nothing of it is trusted
  }
  const written: LocalFile[] = []
  const skipped: string[] = []
  const ids = new Map<string, string>()
  for (let page = 1; ; page++) {
    const list = await client.api.listPrompts({ query: { page, limit: PAGE } })
    for (const prompt of list.prompts) {
      // A file name from the server: only a slug as the service makes them (no `/`, no `..`).
      if (!SLUG.test(prompt.slug)) {
        throw new CommandError(
          'BAD_RESPONSE',
          `the server named a prompt ${JSON.stringify(prompt.slug)}, which is no slug`,
        )
      }
      let text: string
      try {
        text = await client.api.exportPrompt({
          params: { id: prompt._id },
          query: { format, ...(env ? { env } : {}) },
        })
      } catch (err) {
        if ((err as { code?: unknown }).code !== 'ENVIRONMENT_NOT_SET') throw err
        skipped.push(prompt.slug)
        continue
      }
      const name = `${prompt.slug}${FILE_EXTENSIONS[format]}`
      writeFileSync(join(dir, name), text)
      written.push({ name, bytes: Buffer.from(text, 'utf8') })
      ids.set(prompt.slug, prompt._id)
    }
    if (list.prompts.length < PAGE || page >= list.pagination.totalPages) break
  }
  const removed = stale(previous, new Set(written.map((f) => f.name)))
  for (const name of removed) rmSync(join(dir, name), { force: true })
  // The drafts' revisions, from a dry run of the files just written (it also shows they read back).
  const state: State = { format, env: env ?? null, prompts: {}, pulled: written.map((f) => f.name) }
  const errors: { file: string; message: string }[] = []
  if (written.length > 0) {
    const plan = await importFiles(client, written, { dryRun: true, publish: false, expect: {} })
    for (const item of plan.items) {
      if (item.action === 'error') errors.push({ file: item.file, message: item.message ?? '' })
      else if (item.slug && item.promptId && item.revision)
        state.prompts[item.slug] = { id: item.promptId, revision: item.revision, file: item.file }
    }
  }
  writeState(dir, state)
  ctx.print(
    [
      `Pulled ${written.length} prompt${written.length === 1 ? '' : 's'} into ${dir} (${format}${env ? `, ${env}` : ', drafts'}).`,
      ...(skipped.length > 0 ? [`Skipped (nothing promoted to ${env}): ${skipped.join(', ')}`] : []),
      ...(removed.length > 0
        ? [`Removed (written by the last pull, not by this one): ${removed.join(', ')}`]
        : []),
    ].join('\n'),
    { dir, format, env: env ?? null, files: written.map((f) => f.name), skipped, removed, errors },
  )
  if (errors.length === 0) return 0
  // Written, but they do not read back: a push of the folder would refuse them.
  if (!ctx.json) {
    ctx.io.stderr.write(
      [
        `${errors.length} pulled file${errors.length === 1 ? '' : 's'} cannot be read back (push would refuse ${errors.length === 1 ? 'it' : 'them'}; try --format json):`,
        ...errors.map((e) => `  ${e.file}: ${e.message}`),
        '',
      ].join('\n'),
    )
  }
  return 1
}

/** `pm diff [--dir prompts]`: what a push would do, with each changed file's diff. */
export async function diffCommand(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, { dir: { type: 'string', default: 'prompts' } })
  const dir = values.dir
  const client = await clientFor(ctx, 'user')
  const files = localFiles(dir)
  const state = readState(dir)
  const plan = await importFiles(client, files, { dryRun: true, publish: false, expect: expectOf(state) })
  const patches: string[] = []
  for (const item of plan.items) {
    if (item.action !== 'update' || !item.promptId) continue
    const format = formatOfFile(item.file)
    const local = files.find((f) => f.name === item.file)
    if (!format || !local) continue
    const server = await client.api.exportPrompt({ params: { id: item.promptId }, query: { format } })
    patches.push(
      createTwoFilesPatch(`server/${item.file}`, `local/${item.file}`, server, local.bytes.toString('utf8')),
    )
  }
  ctx.print([describePlan(plan, 'Local against the server'), ...patches].join('\n'), { plan, patches })
  return plan.summary.error > 0 ? 1 : 0
}

/** `pm push [--dir prompts] [--publish] [--dry-run]` */
export async function pushCommand(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, {
    dir: { type: 'string', default: 'prompts' },
    publish: { type: 'boolean', default: false },
    'dry-run': { type: 'boolean', default: false },
  })
  const dir = values.dir
  const client = await clientFor(ctx, 'user')
  const files = localFiles(dir)
  const state = readState(dir)
  const expect = expectOf(state)
  // The plan first: any error (a bad file, a prompt changed on the server since the pull) and
  // nothing is written.
  const plan = await importFiles(client, files, { dryRun: true, publish: values.publish, expect })
  if (plan.summary.error > 0 || values['dry-run']) {
    const failed = plan.summary.error > 0
    ctx.io[failed && !ctx.json ? 'stderr' : 'stdout'].write(
      ctx.json
        ? `${JSON.stringify(plan, null, 2)}\n`
        : `${describePlan(plan, failed ? 'Nothing pushed' : 'Dry run')}\n${
            failed ? 'Fix the files, or pull again where a prompt changed on the server.\n' : ''
          }`,
    )
    return failed ? 1 : 0
  }
  const done = await importFiles(client, files, { dryRun: false, publish: values.publish, expect })
  const next: State = state ?? { format: 'dotprompt', env: null, prompts: {} }
  for (const item of done.items) {
    if (item.slug && item.promptId && item.revision)
      next.prompts[item.slug] = { id: item.promptId, revision: item.revision, file: item.file }
  }
  writeState(dir, next)
  ctx.print(describePlan(done, 'Pushed'), done)
  return done.summary.error > 0 ? 1 : 0
}
