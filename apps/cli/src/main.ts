#!/usr/bin/env node
import { run } from './cli.ts'

/** How the user started this program, so that hints name a command that works for them. */
function programName(env: NodeJS.ProcessEnv): string {
  if (env.npm_lifecycle_event === 'cli') {
    return env.npm_config_user_agent?.startsWith('pnpm/') ? 'pnpm cli' : 'npm run cli --'
  }
  // npx of the tarball (`npx -y --package=<tgz> -- pm`): @pm/cli is not on the registry, so name `pm`
  // the way that works, with the tarball the user ran if npm says which.
  if (env.npm_command === 'exec') {
    const pkg = env.npm_config_package
    return `npx -y --package=${pkg && /\.tgz$/.test(pkg) ? pkg : '<pm-cli tarball>'} -- pm`
  }
  return 'pm'
}

async function readStdin(): Promise<string> {
  const chunks: Buffer[] = []
  for await (const chunk of process.stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk))
  return Buffer.concat(chunks).toString('utf8')
}

process.exitCode = await run(process.argv.slice(2), {
  stdout: process.stdout,
  stderr: process.stderr,
  env: process.env,
  readStdin,
  prog: programName(process.env),
})
