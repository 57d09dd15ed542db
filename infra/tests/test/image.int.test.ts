import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { freePort, waitForHttp } from '@pm/testkit'
import { afterAll, describe, expect, it } from 'vitest'
import { rehearseBuild } from '../src/rehearse.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))

/**
 * No Docker engine runs here, so the image of one app is rehearsed instead: the
 * Dockerfile's own build steps (turbo prune, frozen install, turbo build, prod deploy) run
 * outside Docker with `APP=render`, and the runtime stage's CMD starts from what its COPY
 * steps laid out. render is the app with the most workspace dependencies (bus, contracts,
 * kit, template); the other apps differ only by the build argument (a unit test).
 */
describe('Dockerfile with APP=render, rehearsed without Docker', () => {
  const work = mkdtempSync(join(tmpdir(), 'pm-image-'))
  afterAll(() => rmSync(work, { recursive: true, force: true }))
  // The steps run as CI would run them, not inside this turbo/vitest/pnpm invocation.
  const env = Object.fromEntries(
    Object.entries(process.env).filter(([k]) => !/^(TURBO_|npm_|VITEST|NODE_OPTIONS$|PNPM_SCRIPT)/.test(k)),
  )
  env.PATH = `${join(ROOT, 'node_modules', '.bin')}:${process.env.PATH ?? ''}`

  it('builds a production-only bundle whose dist/server.js starts and answers /health/live', async () => {
    const image = rehearseBuild(join(ROOT, 'Dockerfile'), ROOT, work, env, { APP: 'render' })
    expect(image.cmd).toEqual(['node', 'dist/server.js'])

    const app = image.appDir
    expect(existsSync(join(app, 'dist/server.js'))).toBe(true)
    const scoped = readdirSync(join(app, 'node_modules/@pm')).sort()
    expect(scoped).toEqual(['bus', 'contracts', 'kit', 'template'])
    for (const pkg of scoped)
      expect(existsSync(join(app, `node_modules/@pm/${pkg}/dist/index.js`)), pkg).toBe(true)
    // Production dependencies only: no test or build tools.
    const store = readdirSync(join(app, 'node_modules/.pnpm'))
    for (const dev of ['vitest@', 'typescript@', 'testcontainers@', '@biomejs']) {
      expect(
        store.filter((d) => d.startsWith(dev.replace('/', '+'))),
        dev,
      ).toEqual([])
    }

    const port = await freePort()
    const [cmd = 'node', ...args] = image.cmd
    // The image runs `node` without the "source" condition: the packages load from dist/.
    const child = spawn(cmd === 'node' ? process.execPath : cmd, args, {
      cwd: app,
      env: {
        PATH: process.env.PATH ?? '',
        NODE_ENV: 'production',
        PORT: String(port),
        INTERNAL_AUTH_SECRET: 'a-sample-secret-of-at-least-thirty-two-characters',
      },
      stdio: 'ignore',
    })
    try {
      await waitForHttp(`http://127.0.0.1:${port}/health/live`, 30_000)
    } finally {
      child.kill('SIGTERM')
    }
    // A frozen install and five builds: about 80 s on a fast 2-core machine, 238 s in a slow
    // one's full `npm test` (CI, 2026-11-28), so the bound only catches a hang.
  }, 600_000)
})
