import { describe, expect, it } from 'vitest'
import { SLUG_MAX, slugify, uniqueSlug } from './slug.ts'

describe('slugify', () => {
  it.each([
    ['Hello World', 'hello-world'],
    ['  Customer   Support -- Reply!  ', 'customer-support-reply'],
    ['Crème Brûlée', 'creme-brulee'],
    ['Ångström über naïve', 'angstrom-uber-naive'],
    ['Straße Ærø Łódź', 'strasse-aero-lodz'],
    ['ﬁle №5', 'file-no5'],
    ['snake_case.and/slashes', 'snake-case-and-slashes'],
    ['ABC123', 'abc123'],
    ['İstanbul ẞ', 'istanbul-ss'],
    ['---', 'prompt'],
    ['', 'prompt'],
    ['日本語のプロンプト', 'prompt'],
    ['🚀 Launch 🚀', 'launch'],
  ])('%j → %j', (input, expected) => {
    expect(slugify(input)).toBe(expected)
  })

  it('is at most 80 characters and never ends in a hyphen after the cut', () => {
    const name = `${'a'.repeat(79)} b`
    const slug = slugify(name)
    expect(slug.length).toBeLessThanOrEqual(SLUG_MAX)
    expect(slug).toBe('a'.repeat(79))
    expect(slugify('x'.repeat(500))).toBe('x'.repeat(80))
  })

  it('only ever yields lower-case ASCII letters, digits and single inner hyphens', () => {
    for (const name of ['Ça va? Oui!', 'A  --  B', '-x-', 'Ünïcödé ☃ snow', 'tab\tand\nnewline']) {
      expect(slugify(name)).toMatch(/^[a-z0-9]+(?:-[a-z0-9]+)*$/)
    }
  })
})

describe('uniqueSlug', () => {
  it('returns the base when it is free', async () => {
    expect(await uniqueSlug('hello', () => false)).toBe('hello')
  })

  it('appends -2, -3, ... until a free one is found', async () => {
    const taken = new Set(['hello', 'hello-2', 'hello-3'])
    expect(await uniqueSlug('hello', (s) => taken.has(s))).toBe('hello-4')
  })

  it('accepts an async predicate and checks candidates in order', async () => {
    const asked: string[] = []
    const taken = new Set(['p', 'p-2'])
    const slug = await uniqueSlug('p', async (s) => {
      asked.push(s)
      await Promise.resolve()
      return taken.has(s)
    })
    expect(slug).toBe('p-3')
    expect(asked).toEqual(['p', 'p-2', 'p-3'])
  })

  it('shortens a maximum-length base so the suffixed slug stays within 80 characters', async () => {
    const base = 'a'.repeat(SLUG_MAX)
    const slug = await uniqueSlug(base, (s) => s === base)
    expect(slug).toBe(`${'a'.repeat(SLUG_MAX - 2)}-2`)
    expect(slug.length).toBe(SLUG_MAX)
  })

  it('does not leave a double hyphen when the cut lands on one', async () => {
    const base = `${'a'.repeat(77)}-bb`
    const slug = await uniqueSlug(base, (s) => s === base)
    expect(slug).toBe(`${'a'.repeat(77)}-2`)
  })

  it('propagates a failing predicate', async () => {
    await expect(
      uniqueSlug('x', () => {
        throw new Error('store down')
      }),
    ).rejects.toThrow('store down')
  })
})
