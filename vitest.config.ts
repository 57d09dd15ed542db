import { defineConfig } from 'vitest/config'
import base, { integration } from './vitest.base.ts'

/**
 * Every package's tests in one Vitest run (`npm test`: `vitest run` here, then `VITEST_INT=1
 * vitest run int.test`), each package a project with its own vitest.config.ts. One run instead of
 * a pnpm, a Vitest and its workers per package: the unit tests took 88-90 s of CPU instead of
 * 114-116 s (CONTRIBUTING.md, "How long `npm test` takes"). A package's own `pnpm test` still
 * runs it alone.
 */
export default defineConfig({
  test: {
    projects: [
      'apps/*/vitest.config.ts',
      'packages/*/vitest.config.ts',
      'infra/tests/vitest.config.ts',
      'e2e/vitest.config.ts',
    ],
    passWithNoTests: true,
    // The unit tests two files at a time (the type checks run beside them); the integration
    // files' number is each project's (vitest.base.ts).
    ...(integration ? {} : { maxWorkers: 2 }),
    // The summary's reports, at the root (.test-results/unit.json, int.json).
    reporters: base.test?.reporters,
  },
})
