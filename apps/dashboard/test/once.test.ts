import { describe, expect, it } from 'vitest'
import { type Mutation, mutateOnce } from '../src/once.ts'

describe('mutateOnce', () => {
  it('ignores a second submit until the first settles, in the same tick', () => {
    const settle: (() => void)[] = []
    const mutation: Mutation = { mutate: (_v, options) => settle.push(options.onSettled) }
    const busy = { current: false }
    mutateOnce(busy, mutation)
    mutateOnce(busy, mutation)
    expect(settle).toHaveLength(1)
    settle[0]?.()
    mutateOnce(busy, mutation)
    expect(settle).toHaveLength(2)
  })
})
