import { spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const server = fileURLToPath(new URL('./server.ts', import.meta.url))

/**
 * A child process with fd 0 on /dev/null, as a container or a supervisor starts a service: it
 * imports `node:process` as a namespace (as OpenTelemetry's resources package does), then prints
 * what `process.stdin` is and what reading it gives.
 */
function probe(withMain: boolean): { stream: string; fileStream: boolean; read: string } {
  const body = `
    const { ReadStream } = await import('node:fs')
    const { text } = await import('node:stream/consumers')
    const look = async () => {
      await import('node:process')
      const stdin = process.stdin
      const fileStream = stdin instanceof ReadStream
      const read = await text(stdin)
      process.stdout.write(JSON.stringify({ stream: stdin.constructor.name, fileStream, read }))
    }
    ${withMain ? `const { main } = await import(${JSON.stringify(server)}); await main(look)` : 'await look()'}
  `
  const child = spawnSync(process.execPath, ['--conditions=source', '--input-type=module', '-e', body], {
    stdio: ['ignore', 'pipe', 'pipe'],
    encoding: 'utf8',
    timeout: 30_000,
  })
  expect(child.stderr).toBe('')
  expect(child.status).toBe(0)
  return JSON.parse(child.stdout) as { stream: string; fileStream: boolean; read: string }
}

describe("a service's stdin", () => {
  it("is Node's file stream on /dev/null once a namespace import of node:process reads it (the cause)", () => {
    // If this stops holding (a Node release that no longer reads stdin to fill that namespace),
    // emptyStdin is no longer needed for OpenTelemetry's sake; see docs/decisions.md.
    expect(probe(false)).toEqual({ stream: 'ReadStream', fileStream: true, read: '' })
  })

  it('is an empty stream of its own under main, whatever reads it', () => {
    expect(probe(true)).toEqual({ stream: 'Readable', fileStream: false, read: '' })
  })
})
