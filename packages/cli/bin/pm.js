#!/usr/bin/env node
// The `pm` bin runs the built CLI (`pnpm build` first). From a checkout, `pnpm cli ...` runs
// the TypeScript sources directly instead.
import { existsSync } from 'node:fs'

const built = new URL('../dist/main.js', import.meta.url)
if (existsSync(built)) {
  await import(built.href)
} else {
  process.stderr.write(
    'pm: not built yet: run "pnpm build", or use "pnpm cli <command>" from the repository\n',
  )
  process.exitCode = 1
}
