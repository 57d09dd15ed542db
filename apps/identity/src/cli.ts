import { text } from 'node:stream/consumers'
import { runCli } from './cli/run.ts'

// node --conditions=source apps/identity/src/cli.ts <command> [options]   (see USAGE)
process.exitCode = await runCli(process.argv.slice(2), {
  readStdin: () => text(process.stdin),
  out: (s) => process.stdout.write(s),
  err: (s) => process.stderr.write(s),
})
