import { defineConfig } from 'vitest/config'

// Shared by every package's vitest.config.ts. Workspace packages export their TypeScript
// sources under the "source" condition; tests resolve them directly, without a build.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    include: ['src/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: [
      '**/node_modules/**',
      '**/dist/**',
      process.env.VITEST_INT === '1' ? '' : '**/*.int.test.ts',
    ].filter(Boolean),
    testTimeout: 30_000,
    hookTimeout: 60_000,
  },
})
