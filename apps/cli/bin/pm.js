#!/usr/bin/env node
// The `pm` bin runs the built CLI (dist/, made by `pnpm build` or by packing). From a checkout,
// `npm run cli -- <command>` runs the TypeScript sources directly instead.
import { existsSync } from 'node:fs'

const built = new URL('../dist/main.js', import.meta.url)
if (existsSync(built)) {
  await import(built.href)
} else {
  process.stderr.write(
    'pm: not built yet: run "pnpm --filter @pm/cli build", or "npm run cli -- <command>" from the repository\n',
  )
  process.exitCode = 1
}
