import { afterEach, describe, expect, it, vi } from 'vitest'
import { deadline } from './deadline.ts'

describe('deadline', () => {
  afterEach(() => {
    vi.useRealTimers()
  })

  it("aborts with the caller's reason when the caller aborts", () => {
    const caller = new AbortController()
    const d = deadline(caller.signal, 60_000)
    expect(d.signal.aborted).toBe(false)
    caller.abort(new Error('client left'))
    expect(d.signal.aborted).toBe(true)
    expect((d.signal.reason as Error).message).toBe('client left')
    expect(d.timedOut()).toBe(false)
    d.clear()
  })

  it('is aborted at once when the caller already is', () => {
    const caller = new AbortController()
    caller.abort(new Error('gone'))
    const d = deadline(caller.signal, 60_000)
    expect(d.signal.aborted).toBe(true)
    expect(d.timedOut()).toBe(false)
    d.clear()
  })

  it('aborts with a TimeoutError at the deadline', () => {
    vi.useFakeTimers()
    const d = deadline(new AbortController().signal, 1_000)
    vi.advanceTimersByTime(999)
    expect(d.signal.aborted).toBe(false)
    vi.advanceTimersByTime(1)
    expect(d.signal.aborted).toBe(true)
    expect(d.timedOut()).toBe(true)
    expect((d.signal.reason as DOMException).name).toBe('TimeoutError')
  })

  it('does not call a call the caller aborted timed out when the deadline passes before it is cleared', () => {
    vi.useFakeTimers()
    const caller = new AbortController()
    const d = deadline(caller.signal, 1_000)
    caller.abort(new Error('client left'))
    vi.advanceTimersByTime(1_000)
    expect(d.timedOut()).toBe(false)
    expect((d.signal.reason as Error).message).toBe('client left')
    d.clear()
  })

  it('leaves no timer and no listener once cleared', () => {
    vi.useFakeTimers()
    const caller = new AbortController()
    const d = deadline(caller.signal, 1_000)
    expect(vi.getTimerCount()).toBe(1)
    d.clear()
    expect(vi.getTimerCount()).toBe(0)
    vi.advanceTimersByTime(5_000)
    caller.abort()
    expect(d.signal.aborted).toBe(false)
    expect(d.timedOut()).toBe(false)
  })
})
