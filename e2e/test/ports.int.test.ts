import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const run = promisify(execFile)

/** `count` ports from testkit's freePort in a process of its own, as a test worker takes them. */
async function portsOfAnotherProcess(count: number): Promise<number[]> {
  const script = `
    import { freePort } from '@pm/testkit'
    const ports = []
    for (let i = 0; i < ${count}; i++) ports.push(await freePort())
    process.stdout.write(JSON.stringify(ports))
  `
  const { stdout } = await run(
    process.execPath,
    ['--conditions=source', '--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script],
    { cwd: new URL('..', import.meta.url).pathname },
  )
  return JSON.parse(stdout) as number[]
}

describe('testkit freePort across processes', () => {
  // Two processes picking 400 ports each at random from 17,000 would share about nine; the
  // reservations keep them apart (a stack that lost its port to another stack's service had its
  // readiness check answered by that service).
  it('never hands the same port to two processes running side by side', async () => {
    const [a, b] = await Promise.all([portsOfAnotherProcess(400), portsOfAnotherProcess(400)])
    expect(new Set(a).size).toBe(400)
    expect(new Set(b).size).toBe(400)
    expect(a.filter((port) => b.includes(port))).toEqual([])
  }, 60_000)
})
