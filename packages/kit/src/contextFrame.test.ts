import { AsyncLocalStorage } from 'node:async_hooks'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import { describe, expect, it } from 'vitest'
import { backgroundRunner, contextFrameHeld, holdContextFrame } from './contextFrame.ts'
import { main } from './server.ts'

describe('the process context frame', () => {
  it('is not held before it is entered', async () => {
    // A fresh async chain that did not come from a held frame (each test file runs in its own worker).
    await new Promise<void>((resolve) => {
      setImmediate(() => {
        expect(contextFrameHeld()).toBe(false)
        resolve()
      })
    })
  })

  it('is held by everything main starts: awaits, timers, ticks and a server’s requests', async () => {
    const seen: Record<string, boolean> = {}
    await main(async () => {
      seen.start = contextFrameHeld()
      await sleep(1)
      seen.afterAwait = contextFrameHeld()
      await new Promise<void>((resolve) =>
        process.nextTick(() => {
          seen.tick = contextFrameHeld()
          resolve()
        }),
      )
      const server = createServer((_req, res) => {
        seen.request = contextFrameHeld()
        res.end('ok')
      })
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
      const { port } = server.address() as AddressInfo
      const res = await fetch(`http://127.0.0.1:${port}/`)
      await res.text()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    })
    expect(seen).toEqual({ start: true, afterAwait: true, tick: true, request: true })
  })

  it('keeps other stores working inside it, and entering it again changes nothing', async () => {
    const other = new AsyncLocalStorage<string>()
    await main(async () => {
      holdContextFrame()
      await other.run('inner', async () => {
        await sleep(1)
        expect(other.getStore()).toBe('inner')
        expect(contextFrameHeld()).toBe(true)
      })
      expect(other.getStore()).toBeUndefined()
      expect(contextFrameHeld()).toBe(true)
    })
  })
})

describe('backgroundRunner', () => {
  it('runs a function, its timers and promises in the context it was made in, not its caller’s', async () => {
    const request = new AsyncLocalStorage<string>()
    const background = backgroundRunner()
    const seen: Array<string | undefined> = []
    await new Promise<void>((resolve) => {
      request.run('a request', () => {
        seen.push(request.getStore())
        background(() => {
          seen.push(request.getStore())
          setTimeout(() => {
            seen.push(request.getStore())
            void Promise.resolve().then(() => {
              seen.push(request.getStore())
              resolve()
            })
          }, 1)
        })
      })
    })
    expect(seen).toEqual(['a request', undefined, undefined, undefined])
  })
})
