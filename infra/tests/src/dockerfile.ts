import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { APP_NAMES, APPS, type AppName, defaultPort } from './apps.ts'

export interface Instruction {
  keyword: string
  args: string
}

export interface Stage {
  from: string
  name?: string
  instructions: Instruction[]
}

/** Splits a Dockerfile into instructions (continuation lines joined, comments dropped). */
export function parseDockerfile(text: string): Instruction[] {
  const out: Instruction[] = []
  let pending = ''
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd()
    // Comment lines go, even between continuation lines (as Docker does).
    if (/^\s*#/.test(line)) continue
    if (line.endsWith('\\')) {
      pending += `${line.slice(0, -1)} `
      continue
    }
    const full = (pending + line).trim()
    pending = ''
    if (full === '') continue
    const [keyword = '', ...rest] = full.split(/\s+/)
    out.push({ keyword: keyword.toUpperCase(), args: rest.join(' ') })
  }
  return out
}

/** Global ARGs (before the first FROM) and the stages. */
export function stagesOf(instructions: Instruction[]): { args: Record<string, string>; stages: Stage[] } {
  const args: Record<string, string> = {}
  const stages: Stage[] = []
  for (const ins of instructions) {
    if (ins.keyword === 'FROM') {
      const [from = '', as, name] = ins.args.split(/\s+/)
      stages.push({ from, ...(as?.toUpperCase() === 'AS' && name ? { name } : {}), instructions: [] })
    } else if (stages.length === 0) {
      if (ins.keyword === 'ARG') {
        const [key = '', value = ''] = ins.args.split('=')
        args[key] = value
      }
    } else {
      stages.at(-1)?.instructions.push(ins)
    }
  }
  return { args, stages }
}

function expand(text: string, args: Record<string, string>): string {
  return text.replace(
    /\$\{(\w+)\}|\$(\w+)/g,
    (_, a: string | undefined, b: string | undefined) => args[a ?? b ?? ''] ?? '',
  )
}

/** The pnpm version of package.json's packageManager and the turbo version of the lockfile. */
export function pinnedVersions(repoRoot: string): { pnpm: string; turbo: string } {
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as { packageManager?: string }
  const pnpm = /^pnpm@(.+)$/.exec(pkg.packageManager ?? '')?.[1] ?? ''
  const lock = readFileSync(join(repoRoot, 'pnpm-lock.yaml'), 'utf8')
  const turbo = /^ {2}turbo@([0-9][^:]*):$/m.exec(lock)?.[1] ?? ''
  return { pnpm, turbo }
}

/** The one Dockerfile, at the repository root: every app's image, the app a build argument. */
export const DOCKERFILE = 'Dockerfile'

/** The build argument that picks the app (`docker build --build-arg APP=render .`). */
export const APP_ARG = 'APP'

/** The names a text refers to as `$NAME` or `${NAME...}` (shell and Dockerfile syntax). */
function references(text: string): string[] {
  return [...text.matchAll(/\$\{(\w+)|\$(\w+)/g)].map((m) => m[1] ?? m[2] ?? '')
}

/**
 * A RUN step as the shell sees it with these values: `$X`, `${X}`, `${X:?message}` and
 * `${X:-default}` expanded, double quotes dropped. An unset `${X:?...}` stays as it is, so
 * that a step that needs the value shows it.
 */
export function expandShell(text: string, values: Record<string, string>): string {
  return text
    .replace(/\$\{(\w+)(?::([?-])((?:[^{}]|\{[^{}]*\})*))?\}|\$(\w+)/g, (whole, braced, op, arg, bare) => {
      const name = (braced ?? bare) as string
      const value = values[name]
      if (value !== undefined && value !== '') return value
      if (op === '-') return arg as string
      return op === '?' ? whole : ''
    })
    .replaceAll('"', '')
}

/**
 * The Dockerfile built for one app (`--build-arg APP=<app>`): turbo prune of that app, a
 * frozen install, turbo's build of the app (and so of its workspace dependencies), a
 * production-only deploy, and a runtime stage on Node 24 slim that runs `node dist/server.js`
 * as a non-root user. The tool versions are the repository's pins, the build commands the
 * ones CI runs, and every stage that uses a build argument declares it (Docker gives a stage
 * no argument it does not declare: an undeclared APP would be empty there).
 */
export function checkDockerfile(app: AppName, repoRoot: string): string[] {
  const file = join(repoRoot, DOCKERFILE)
  const where = `${DOCKERFILE} (${APP_ARG}=${app})`
  if (!existsSync(file)) return [`${DOCKERFILE}: missing`]
  const problems: string[] = []
  const instructions = parseDockerfile(readFileSync(file, 'utf8'))
  const { args, stages } = stagesOf(instructions)
  const declared = new Set(
    instructions.filter((i) => i.keyword === 'ARG').map((i) => i.args.split('=')[0] ?? ''),
  )
  for (const [index, stage] of stages.entries()) {
    const inStage = new Set<string>()
    for (const ins of stage.instructions) {
      if (ins.keyword === 'ARG') inStage.add(ins.args.split('=')[0] ?? '')
      for (const name of references(ins.args)) {
        if (declared.has(name) && !inStage.has(name)) {
          problems.push(
            `${DOCKERFILE}: stage ${stage.name ?? index} uses ${name} without declaring ARG ${name} in it`,
          )
        }
      }
    }
  }
  const runs = stages.flatMap((s) => s.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args))
  const runText = expandShell(runs.join('\n'), { ...args, [APP_ARG]: app })
  const pkg = `@pm/${app}`
  const expectRun = (pattern: RegExp, what: string) => {
    if (!pattern.test(runText)) problems.push(`${where}: no step ${what}`)
  }
  expectRun(new RegExp(`turbo prune ${pkg} --docker`), `turbo prune ${pkg} --docker`)
  expectRun(/pnpm install --frozen-lockfile/, 'pnpm install --frozen-lockfile')
  expectRun(new RegExp(`pnpm turbo run build --filter=${pkg}(\\s|$)`), `pnpm turbo run build --filter=${pkg}`)
  expectRun(new RegExp(`pnpm --filter=${pkg} deploy --prod`), `pnpm --filter=${pkg} deploy --prod`)

  const pins = pinnedVersions(repoRoot)
  if (args.PNPM_VERSION !== pins.pnpm)
    problems.push(`${DOCKERFILE}: pnpm ${args.PNPM_VERSION}, the repository pins ${pins.pnpm}`)
  if (args.TURBO_VERSION !== pins.turbo) {
    problems.push(`${DOCKERFILE}: turbo ${args.TURBO_VERSION}, the lockfile has ${pins.turbo}`)
  }

  for (const stage of stages) {
    const image = expand(stage.from, args)
    const isStage = stages.some((s) => s.name === stage.from)
    if (!isStage && !/^node:24(\.[0-9.]+)?-[a-z]+-slim$|^node:24(\.[0-9.]+)?-slim$/.test(image)) {
      problems.push(
        `${DOCKERFILE}: stage ${stage.name ?? '?'} starts from ${image}, not a Node 24 slim image`,
      )
    }
  }
  const runtime = stages.at(-1)
  if (!runtime || stages.length < 3) return [...problems, `${DOCKERFILE}: not a multi-stage build`]
  const last = (keyword: string) => runtime.instructions.filter((i) => i.keyword === keyword).at(-1)?.args
  const user = last('USER')
  const uid = user?.split(':')[0]
  if (!uid || !/^[0-9]+$/.test(uid) || uid === '0') {
    problems.push(
      `${DOCKERFILE}: runtime user ${user} is not a numeric non-root uid (Kubernetes runAsNonRoot checks uids)`,
    )
  }
  if (last('CMD') !== '["node", "dist/server.js"]') problems.push(`${DOCKERFILE}: CMD is ${last('CMD')}`)
  // One file for apps on seven ports: a fixed EXPOSE would be wrong for six of them. Each app
  // listens on its PORT setting (its schema's default), which compose and the manifests set
  // and check against their container ports.
  const exposed = last('EXPOSE')
  if (exposed !== undefined) {
    problems.push(
      `${DOCKERFILE}: EXPOSE ${exposed}, but ${app} listens on ${defaultPort(APPS[app])}: the file serves every app, expose none`,
    )
  }
  if (!runtime.instructions.some((i) => i.keyword === 'ENV' && /NODE_ENV=production/.test(i.args))) {
    problems.push(`${DOCKERFILE}: runtime does not set NODE_ENV=production`)
  }
  for (const copy of runtime.instructions.filter((i) => i.keyword === 'COPY')) {
    if (!copy.args.includes('--from='))
      problems.push(`${DOCKERFILE}: runtime copies from the build context (${copy.args})`)
  }
  if (runtime.instructions.some((i) => i.keyword === 'RUN' && /pnpm|turbo|npm install/.test(i.args))) {
    problems.push(`${DOCKERFILE}: runtime stage installs or builds`)
  }
  return [...new Set(problems)]
}

/**
 * One Dockerfile for every app (STYLE, "Infra"): no `apps/<app>/Dockerfile` copy, no app named
 * in the file, and APP without a default, refused when empty (a build that forgets it fails,
 * naming it, rather than building some app).
 */
export function checkOneDockerfile(repoRoot: string): string[] {
  const problems: string[] = []
  for (const dir of readdirSync(join(repoRoot, 'apps'))) {
    if (existsSync(join(repoRoot, 'apps', dir, 'Dockerfile')))
      problems.push(
        `apps/${dir}/Dockerfile: a copy; build from ${DOCKERFILE} with --build-arg ${APP_ARG}=${dir}`,
      )
  }
  const file = join(repoRoot, DOCKERFILE)
  if (!existsSync(file)) return [...problems, `${DOCKERFILE}: missing`]
  const instructions = parseDockerfile(readFileSync(file, 'utf8'))
  const text = instructions.map((i) => `${i.keyword} ${i.args}`).join('\n')
  for (const app of APP_NAMES) {
    if (new RegExp(`@pm/${app}\\b`).test(text)) problems.push(`${DOCKERFILE}: names the app ${app}`)
  }
  const appArgs = instructions.filter((i) => i.keyword === 'ARG' && i.args.split('=')[0] === APP_ARG)
  if (appArgs.length === 0) problems.push(`${DOCKERFILE}: no ARG ${APP_ARG}`)
  if (appArgs.some((i) => i.args.includes('=')))
    problems.push(`${DOCKERFILE}: ARG ${APP_ARG} has a default; a build must name its app`)
  if (!new RegExp(`\\$\\{${APP_ARG}:\\?`).test(text))
    problems.push(`${DOCKERFILE}: no step refuses an empty ${APP_ARG} (\${${APP_ARG}:?...})`)
  return problems
}

/** The commands the Dockerfiles run are the ones CI runs (scripts/run.sh, package.json). */
export function checkSameCommandsAsCi(repoRoot: string): string[] {
  const problems: string[] = []
  const run = readFileSync(join(repoRoot, 'scripts', 'run.sh'), 'utf8')
  if (!run.includes('pnpm install --frozen-lockfile'))
    problems.push('scripts/run.sh no longer installs with --frozen-lockfile')
  const pkg = JSON.parse(readFileSync(join(repoRoot, 'package.json'), 'utf8')) as {
    scripts?: Record<string, string>
  }
  if (!/turbo run build$/.test(pkg.scripts?.build ?? ''))
    problems.push('package.json build is no longer turbo run build')
  for (const app of APP_NAMES) {
    const appPkg = JSON.parse(readFileSync(join(repoRoot, 'apps', app, 'package.json'), 'utf8')) as {
      scripts?: Record<string, string>
    }
    if (appPkg.scripts?.start !== 'node dist/server.js') {
      problems.push(`apps/${app}/package.json start is not "node dist/server.js", which the image runs`)
    }
  }
  return problems
}

/** What must never enter the build context. */
export function checkDockerignore(repoRoot: string): string[] {
  const file = join(repoRoot, '.dockerignore')
  if (!existsSync(file)) return ['.dockerignore: missing']
  const lines = new Set(
    readFileSync(file, 'utf8')
      .split('\n')
      .map((l) => l.trim()),
  )
  return ['.git', '**/node_modules', '**/dist', '.env', '.tools', '**/data']
    .filter((entry) => !lines.has(entry))
    .map((entry) => `.dockerignore: does not exclude ${entry}`)
}
