import { describe, expect, it } from 'vitest'
import { lowestFreeSlug, SLUG_MAX, slugify, slugStem } from './slug.ts'

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

describe('lowestFreeSlug', () => {
  it('returns the base when it is free', () => {
    expect(lowestFreeSlug('hello', new Set())).toEqual({ slug: 'hello', n: 1 })
  })

  it('appends -2, -3, ... and takes the lowest free one, gaps included', () => {
    expect(lowestFreeSlug('hello', new Set(['hello', 'hello-2', 'hello-3']))).toEqual({
      slug: 'hello-4',
      n: 4,
    })
    expect(lowestFreeSlug('hello', new Set(['hello', 'hello-3']))).toEqual({ slug: 'hello-2', n: 2 })
  })

  it('looks from `from` on', () => {
    expect(lowestFreeSlug('p', new Set(['p-5']), 5)).toEqual({ slug: 'p-6', n: 6 })
  })

  it('shortens a maximum-length base so the suffixed slug stays within 80 characters', () => {
    const base = 'a'.repeat(SLUG_MAX)
    const { slug } = lowestFreeSlug(base, new Set([base]))
    expect(slug).toBe(`${'a'.repeat(SLUG_MAX - 2)}-2`)
    expect(slug.length).toBe(SLUG_MAX)
  })

  it('does not leave a double hyphen when the cut lands on one', () => {
    const base = `${'a'.repeat(77)}-bb`
    expect(lowestFreeSlug(base, new Set([base])).slug).toBe(`${'a'.repeat(77)}-2`)
  })
})

describe('slugStem', () => {
  it('is the base when the base leaves room for any suffix', () => {
    expect(slugStem('hello')).toBe('hello')
    expect(slugStem('a'.repeat(SLUG_MAX - 8))).toBe('a'.repeat(SLUG_MAX - 8))
  })

  it('starts every candidate of a long base, whose suffixes shorten it', () => {
    for (const base of ['a'.repeat(SLUG_MAX), `${'a'.repeat(70)}-b-cdefgh`, `${'x'.repeat(75)}-y-zz`]) {
      const stem = slugStem(base)
      for (const n of [1, 2, 9, 10, 99, 100, 999, 1000, 99_999, 9_999_999]) {
        const { slug } = lowestFreeSlug(base, new Set(), n)
        expect(slug.startsWith(stem), slug).toBe(true)
      }
    }
  })
})
