import { execFileSync } from 'node:child_process'
import { cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs'
import { basename, join } from 'node:path'
import { parseDockerfile, type Stage, stagesOf } from './dockerfile.ts'

/** What never enters the build context (.dockerignore), skipped when copying the repository. */
const IGNORED = new Set(['node_modules', 'dist', '.git', '.turbo', '.tools', 'data', 'coverage', '.env'])

/** The only programs a rehearsed RUN step may call: nothing here touches the host outside `root`. */
const ALLOWED_RUN = /^(turbo|pnpm) /

export interface Rehearsal {
  /** Where each stage's filesystem root was laid out. */
  stageRoot(stage: string): string
  /** The runtime stage's working directory, filled by its COPY --from steps. */
  appDir: string
  /** The runtime stage's CMD, as an argument list. */
  cmd: string[]
  /** Every command run, with the paths it ran in. */
  log: string[]
}

/**
 * Runs a Dockerfile's build stages outside Docker, step by step, as the images cannot be
 * built on these machines. Each stage gets its own directory standing for its `/`; absolute
 * paths in RUN steps are mapped into it, `COPY . .` copies the repository minus what
 * .dockerignore keeps out, `COPY --from` copies between stage directories. The `base` stage
 * only installs pnpm and turbo, which the repository's toolchain already provides at the
 * same pinned versions (checked by the unit tests), so its RUN is not repeated. The build
 * arguments (APP) reach the RUN steps of the stages that declare them, as in Docker. The runtime
 * stage is laid out from its COPY --from steps only; its RUN steps (deleting npm from the
 * image) are never executed here. Only `turbo` and `pnpm` commands are run.
 */
export function rehearseBuild(
  dockerfile: string,
  repoRoot: string,
  root: string,
  env: NodeJS.ProcessEnv,
  buildArgs: Record<string, string> = {},
): Rehearsal {
  const { stages } = stagesOf(parseDockerfile(readFileSync(dockerfile, 'utf8')))
  const log: string[] = []
  const stageRoot = (name: string) => join(root, name)
  const inStage = (stage: string, path: string) =>
    path.startsWith('/') ? join(stageRoot(stage), path) : path
  const runtime = stages.at(-1)
  if (!runtime) throw new Error(`${dockerfile}: no stages`)
  const named = (stage: Stage, i: number) => stage.name ?? `stage${i}`
  let appDir = ''

  stages.forEach((stage, i) => {
    const name = named(stage, i)
    const isRuntime = stage === runtime
    const isBase = !stages.some((s) => s.name === stage.from) && !isRuntime
    let cwd = stageRoot(name)
    mkdirSync(cwd, { recursive: true })
    // As in Docker, a RUN step sees the build arguments its stage declares, as variables.
    const stageEnv: NodeJS.ProcessEnv = { ...env }
    for (const ins of stage.instructions) {
      if (ins.keyword === 'ARG') {
        const [key = '', fallback] = ins.args.split('=')
        const value = buildArgs[key] ?? fallback
        if (value !== undefined) stageEnv[key] = value
      } else if (ins.keyword === 'WORKDIR') {
        cwd = inStage(name, ins.args)
        mkdirSync(cwd, { recursive: true })
        if (isRuntime) appDir = cwd
      } else if (ins.keyword === 'COPY') {
        const parts = ins.args.split(/\s+/)
        const from = parts.find((p) => p.startsWith('--from='))?.slice('--from='.length)
        const [src = '', dest = ''] = parts.filter((p) => !p.startsWith('--'))
        const target = dest.startsWith('/') ? inStage(name, dest) : join(cwd, dest)
        if (from) {
          cpSync(inStage(from, src), target, { recursive: true, verbatimSymlinks: true })
        } else if (src === '.') {
          cpSync(repoRoot, target, {
            recursive: true,
            verbatimSymlinks: true,
            filter: (path) => !IGNORED.has(basename(path)),
          })
        } else {
          cpSync(join(repoRoot, src), join(target, dest.endsWith('/') ? basename(src) : ''), {
            recursive: true,
          })
        }
        log.push(`${name}: COPY ${ins.args}`)
      } else if (ins.keyword === 'RUN' && !isBase && !isRuntime) {
        const command = ins.args
          .replace(/--mount=\S+\s*/g, '')
          .replace(/(^|[\s=])\/(?=[A-Za-z])/g, `$1${stageRoot(name)}/`)
          .trim()
        if (!ALLOWED_RUN.test(command)) throw new Error(`${dockerfile}: refusing to rehearse "${command}"`)
        log.push(`${name} (${cwd}): ${command}`)
        execFileSync('bash', ['-c', command], {
          cwd,
          env: stageEnv,
          stdio: 'pipe',
          maxBuffer: 64 * 1024 * 1024,
        })
      }
    }
  })
  const cmdArgs = runtime.instructions.filter((i) => i.keyword === 'CMD').at(-1)?.args ?? '[]'
  if (!appDir || !existsSync(appDir)) throw new Error(`${dockerfile}: the runtime stage has no WORKDIR`)
  return { stageRoot, appDir, cmd: JSON.parse(cmdArgs) as string[], log }
}
