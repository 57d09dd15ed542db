import { EventEmitter } from 'node:events'
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  backupStores,
  KEY_FILE,
  onInterrupt,
  restoreStores,
  STORE_FILES,
  type SignalTarget,
  stagingPaths,
} from '../src/backup.ts'
import { run } from '../src/cli.ts'

const REPO = join(import.meta.dirname, '../../..')
const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)

/** The .ts files under `dir`, tests left out. */
function sources(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((f) => f.endsWith('.ts') && !f.endsWith('.test.ts'))
    .map((f) => join(dir, f))
}

/** A WAL-mode store as the services leave it, with one row that names it. */
function makeStore(dataDir: string, name: string, value = name): void {
  const db = new DatabaseSync(join(dataDir, name))
  db.exec('PRAGMA journal_mode = WAL; CREATE TABLE IF NOT EXISTS t (v TEXT); DELETE FROM t')
  db.prepare('INSERT INTO t (v) VALUES (?)').run(value)
  db.close()
}

function rowOf(file: string): string {
  const db = new DatabaseSync(file, { readOnly: true })
  try {
    return String((db.prepare('SELECT v FROM t').get() as { v: string }).v)
  } finally {
    db.close()
  }
}

/** A stand-in for `process`: signals are emitted by the test, kill is recorded. */
function fakeProcess() {
  const emitter = new EventEmitter()
  const kill = vi.fn()
  const target: SignalTarget & { emit(signal: string): boolean; count(): number } = {
    pid: 4242,
    once: (signal, listener) => emitter.once(signal, listener),
    off: (signal, listener) => emitter.off(signal, listener),
    kill,
    emit: (signal) => emitter.emit(signal, signal),
    count: () => emitter.listenerCount('SIGINT') + emitter.listenerCount('SIGTERM'),
  }
  return { target, kill }
}

async function cli(args: string[]) {
  let stdout = ''
  let stderr = ''
  const code = await run(args, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: { HOME: tmpdir() },
  })
  return { code, stdout, stderr }
}

describe('the stores a backup holds', () => {
  it('are the SQLite files the services of the embedded default open under DATA_DIR', () => {
    const embedded = readFileSync(join(REPO, 'apps/embedded/src/embedded.ts'), 'utf8')
    const packages = [...embedded.matchAll(/import \{ buildApp as \w+[^}]*\} from '(@pm\/[\w-]+)'/g)].map(
      (m) => m[1],
    )
    expect(packages.length).toBeGreaterThanOrEqual(6)
    const dirs = readdirSync(join(REPO, 'apps')).filter((d) =>
      existsSync(join(REPO, 'apps', d, 'package.json')),
    )
    const named = new Set<string>()
    for (const pkg of packages) {
      const dir = dirs.find(
        (d) => JSON.parse(readFileSync(join(REPO, 'apps', d, 'package.json'), 'utf8')).name === pkg,
      )
      expect(dir, pkg).toBeDefined()
      for (const file of sources(join(REPO, 'apps', String(dir), 'src')))
        for (const m of readFileSync(file, 'utf8').matchAll(/join\(config\.DATA_DIR, '([\w.-]+\.db)'\)/g))
          named.add(String(m[1]))
    }
    expect([...named].sort()).toEqual([...STORE_FILES].sort())
  })
})

describe('pm backup / pm restore (function level)', () => {
  let root: string
  let live: string
  let out: string

  beforeEach(() => {
    root = mkdtempSync(join(tmpdir(), 'pm-backup-unit-'))
    live = join(root, 'live')
    mkdirSync(live, { mode: 0o700 })
    out = join(root, 'backups', 'b.pmbak')
  })
  afterEach(() => rmSync(root, { recursive: true, force: true }))

  it('copies every store and the key file, and restores them all', async () => {
    for (const name of STORE_FILES) makeStore(live, name)
    writeFileSync(join(live, KEY_FILE), 'k1\n', { mode: 0o600 })
    const result = await backupStores(live, out)
    expect(result.stores.map((s) => s.name)).toEqual([...STORE_FILES, KEY_FILE])
    expect(mode(out)).toBe('600')
    expect(readdirSync(join(root, 'backups'))).toEqual(['b.pmbak'])

    const fresh = join(root, 'fresh')
    const restored = restoreStores(out, fresh)
    expect(restored.notInBackup).toEqual([])
    for (const name of STORE_FILES) expect(rowOf(join(fresh, name))).toBe(name)
  })

  it('stages the copies beside the output in a 0700 folder of 0600 files, and removes them on SIGTERM', async () => {
    for (const name of STORE_FILES) makeStore(live, name)
    const { target, kill } = fakeProcess()
    const { dir } = stagingPaths(out)
    const running = backupStores(live, out, { signals: target })
    // Awaited below; handled now too, so that a failed expectation leaves no unhandled rejection.
    running.catch(() => undefined)
    // The first copy is under way (backupStores awaits SQLite's backup, whose thread opens and
    // removes the copy's rollback journal as it goes: it takes the copy's mode when it is there).
    expect(mode(dir)).toBe('700')
    expect(readdirSync(dir).filter((n) => n !== 'identity.db-journal')).toEqual(['identity.db'])
    expect(mode(join(dir, 'identity.db'))).toBe('600')
    try {
      expect(mode(join(dir, 'identity.db-journal'))).toBe('600')
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err
    }
    expect(target.count()).toBe(2)

    target.emit('SIGTERM')
    expect(existsSync(dir)).toBe(false)
    expect(kill).toHaveBeenCalledWith(4242, 'SIGTERM')
    expect(target.count()).toBe(0)
    // Here the process would have ended; in the test the copy fails instead, and leaves nothing.
    await running.catch(() => undefined)
    expect(readdirSync(join(root, 'backups'))).toEqual([])
  })

  it('removes what an interrupted run left (the staging folder, the .partial of older versions)', async () => {
    makeStore(live, 'identity.db')
    const { dir, legacyPartial } = stagingPaths(out)
    mkdirSync(dir, { recursive: true })
    writeFileSync(join(dir, 'identity.db'), 'old copy')
    writeFileSync(legacyPartial, 'old bundle')
    const { target } = fakeProcess()
    await backupStores(live, out, { signals: target })
    expect(readdirSync(join(root, 'backups'))).toEqual(['b.pmbak'])
    expect(target.count()).toBe(0)
  })

  it('a backup without runs.db and experiments.db leaves none of the current ones: refused, then set aside with --force', async () => {
    // An older backup: made when the embedded default had three stores.
    for (const name of ['identity.db', 'prompts.db', 'webhooks.db']) makeStore(live, name, 'then')
    await backupStores(live, out)
    for (const name of STORE_FILES) makeStore(live, name, 'now')

    const refused = await cli(['restore', out, '--data-dir', live])
    expect(refused.code).toBe(1)
    expect(refused.stderr).toMatch(/runs\.db, experiments\.db too: this backup does not hold them/)
    expect(rowOf(join(live, 'runs.db'))).toBe('now')

    const forced = await cli(['restore', out, '--data-dir', live, '--force', '--json'])
    expect(forced.code).toBe(0)
    const result = JSON.parse(forced.stdout) as { notInBackup: string[]; setAside: string[] }
    expect(result.notInBackup).toEqual(['runs.db', 'experiments.db'])
    expect(result.setAside).toHaveLength(5)
    for (const f of result.setAside) expect(existsSync(f)).toBe(true)
    for (const name of ['runs.db', 'experiments.db']) {
      expect(existsSync(join(live, name))).toBe(false)
      expect(existsSync(join(live, `${name}-wal`))).toBe(false)
    }
    expect(rowOf(join(live, 'prompts.db'))).toBe('then')

    // Into an empty DATA_DIR it simply says so.
    const fresh = await cli(['restore', out, '--data-dir', join(root, 'fresh')])
    expect(fresh.code).toBe(0)
    expect(fresh.stdout).toContain('Not in this backup: runs.db, experiments.db')
  })
})

describe('onInterrupt', () => {
  it('cleans up, stops listening and raises the same signal again', () => {
    const { target, kill } = fakeProcess()
    const cleanup = vi.fn()
    onInterrupt(cleanup, target)
    target.emit('SIGINT')
    expect(cleanup).toHaveBeenCalledTimes(1)
    expect(kill).toHaveBeenCalledWith(4242, 'SIGINT')
    expect(target.count()).toBe(0)
  })

  it('stops listening when told, without cleaning up', () => {
    const { target, kill } = fakeProcess()
    const cleanup = vi.fn()
    onInterrupt(cleanup, target)()
    expect(target.emit('SIGTERM')).toBe(false)
    expect(cleanup).not.toHaveBeenCalled()
    expect(kill).not.toHaveBeenCalled()
  })
})
