import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { dirname, join } from 'node:path'

/** A hash of the files at `paths` (folders walked in name order; missing paths skipped). */
export function hashFiles(paths: readonly string[]): string {
  const hash = createHash('sha256')
  const into = (path: string) => {
    if (!existsSync(path)) return
    if (statSync(path).isDirectory()) {
      for (const name of readdirSync(path).sort()) into(join(path, name))
      return
    }
    hash.update(path)
    hash.update(readFileSync(path))
  }
  for (const path of paths) into(path)
  return hash.digest('hex').slice(0, 16)
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/**
 * `dir` built once for every test process of a run: the first process to take the lock (a
 * folder beside it) calls `build(partial)`, which writes a partial folder that is then renamed
 * to `dir`; the others wait for `dir/<marker>`. A lock left by a run that died is taken over
 * after 5 minutes. Name `dir` after a hash of what it is built from, so a change rebuilds it.
 */
export function buildOnce(dir: string, marker: string, build: (partial: string) => void): string {
  const lock = `${dir}.lock`
  mkdirSync(dirname(dir), { recursive: true })
  const deadline = Date.now() + 10 * 60_000
  while (!existsSync(join(dir, marker))) {
    if (Date.now() > deadline) throw new Error(`${dir} was not built within 10 minutes`)
    try {
      mkdirSync(lock, { recursive: false })
    } catch {
      const since = statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > 5 * 60_000) rmSync(lock, { recursive: true, force: true })
      sleep(200)
      continue
    }
    try {
      if (existsSync(join(dir, marker))) break
      const partial = `${dir}.partial-${process.pid}`
      rmSync(partial, { recursive: true, force: true })
      build(partial)
      rmSync(dir, { recursive: true, force: true })
      renameSync(partial, dir)
    } finally {
      rmSync(lock, { recursive: true, force: true })
    }
  }
  return dir
}
