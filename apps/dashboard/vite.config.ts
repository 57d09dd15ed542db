import { defaultClientConditions, defineConfig } from 'vite'

/**
 * The dashboard builds to dist/ (index.html and hashed files under assets/), which the gateway
 * serves at /. Vite's own transform handles TSX (React's automatic runtime); in development
 * `vite` proxies /api to a running gateway (PM_GATEWAY_URL, default http://127.0.0.1:8080).
 */
export default defineConfig({
  oxc: { jsx: { runtime: 'automatic' } },
  // Workspace packages are bundled from their TypeScript sources (no build of them first).
  resolve: { conditions: ['source', ...defaultClientConditions] },
  build: {
    target: 'es2022',
    sourcemap: false,
    // The budget check (scripts/budget.ts) reads this manifest to find the first route's files.
    manifest: true,
    modulePreload: { polyfill: false },
    rolldownOptions: {
      onwarn(warning, warn) {
        // React Server Components' "use client" markers mean nothing in a browser bundle.
        if (warning.code !== 'MODULE_LEVEL_DIRECTIVE') warn(warning)
      },
    },
  },
  server: {
    proxy: { '/api': process.env.PM_GATEWAY_URL ?? 'http://127.0.0.1:8080' },
  },
})
