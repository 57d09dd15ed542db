import { existsSync, readFileSync } from 'node:fs'
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

/**
 * One app's Dockerfile: turbo prune of that app, a frozen install, turbo's build of the app
 * (and so of its workspace dependencies), a production-only deploy, and a runtime stage on
 * Node 24 slim that runs `node dist/server.js` as a non-root user and exposes the app's port.
 * The tool versions are the repository's pins, and the build commands are the ones CI runs.
 */
export function checkDockerfile(app: AppName, repoRoot: string): string[] {
  const file = join(repoRoot, 'apps', app, 'Dockerfile')
  const where = `apps/${app}/Dockerfile`
  if (!existsSync(file)) return [`${where}: missing`]
  const problems: string[] = []
  const { args, stages } = stagesOf(parseDockerfile(readFileSync(file, 'utf8')))
  const runs = stages.flatMap((s) => s.instructions.filter((i) => i.keyword === 'RUN').map((i) => i.args))
  const runText = runs.join('\n')
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
    problems.push(`${where}: pnpm ${args.PNPM_VERSION}, the repository pins ${pins.pnpm}`)
  if (args.TURBO_VERSION !== pins.turbo) {
    problems.push(`${where}: turbo ${args.TURBO_VERSION}, the lockfile has ${pins.turbo}`)
  }

  for (const stage of stages) {
    const image = expand(stage.from, args)
    const isStage = stages.some((s) => s.name === stage.from)
    if (!isStage && !/^node:24(\.[0-9.]+)?-[a-z]+-slim$|^node:24(\.[0-9.]+)?-slim$/.test(image)) {
      problems.push(`${where}: stage ${stage.name ?? '?'} starts from ${image}, not a Node 24 slim image`)
    }
  }
  const runtime = stages.at(-1)
  if (!runtime || stages.length < 3) return [...problems, `${where}: not a multi-stage build`]
  const last = (keyword: string) => runtime.instructions.filter((i) => i.keyword === keyword).at(-1)?.args
  const user = last('USER')
  const uid = user?.split(':')[0]
  if (!uid || !/^[0-9]+$/.test(uid) || uid === '0') {
    problems.push(
      `${where}: runtime user ${user} is not a numeric non-root uid (Kubernetes runAsNonRoot checks uids)`,
    )
  }
  if (last('CMD') !== '["node", "dist/server.js"]') problems.push(`${where}: CMD is ${last('CMD')}`)
  if (last('EXPOSE') !== String(defaultPort(APPS[app]))) {
    problems.push(`${where}: EXPOSE ${last('EXPOSE')}, the app listens on ${defaultPort(APPS[app])}`)
  }
  if (!runtime.instructions.some((i) => i.keyword === 'ENV' && /NODE_ENV=production/.test(i.args))) {
    problems.push(`${where}: runtime does not set NODE_ENV=production`)
  }
  for (const copy of runtime.instructions.filter((i) => i.keyword === 'COPY')) {
    if (!copy.args.includes('--from='))
      problems.push(`${where}: runtime copies from the build context (${copy.args})`)
  }
  if (runtime.instructions.some((i) => i.keyword === 'RUN' && /pnpm|turbo|npm install/.test(i.args))) {
    problems.push(`${where}: runtime stage installs or builds`)
  }
  return problems
}

/** The five Dockerfiles are the same file but for the app's name and port. */
export function checkDockerfilesAlike(repoRoot: string): string[] {
  const normal = (app: AppName) =>
    readFileSync(join(repoRoot, 'apps', app, 'Dockerfile'), 'utf8')
      .replaceAll(app, '<app>')
      .replace(/^EXPOSE \d+$/m, 'EXPOSE <port>')
      .replace(/^# The .*'s image\..*$/m, '')
  const reference = normal('gateway')
  return APP_NAMES.filter((app) => normal(app) !== reference).map(
    (app) => `apps/${app}/Dockerfile differs from apps/gateway/Dockerfile beyond the app's name and port`,
  )
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
