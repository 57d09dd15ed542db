export const SLUG_MAX = 80
const FALLBACK = 'prompt'

// Letters NFKD leaves whole; without this "Straße" would come out as "stra-e".
const TRANSLITERATE: Record<string, string> = {
  ß: 'ss',
  æ: 'ae',
  œ: 'oe',
  ø: 'o',
  ł: 'l',
  đ: 'd',
  ð: 'd',
  þ: 'th',
  ı: 'i',
}
const TRANSLITERABLE = new RegExp(`[${Object.keys(TRANSLITERATE).join('')}]`, 'g')

function trimHyphens(s: string): string {
  return s.replace(/^-+|-+$/g, '')
}

/** A URL-safe, ASCII, lower-case, hyphen-separated form of a prompt name (never empty). */
export function slugify(name: string): string {
  const ascii = name
    .normalize('NFKD')
    // After decomposing, so compatibility forms such as "№" → "No" are lowered too.
    .toLowerCase()
    .replace(/\p{M}/gu, '')
    .replace(TRANSLITERABLE, (c) => TRANSLITERATE[c] ?? '-')
  const slug = trimHyphens(trimHyphens(ascii.replace(/[^a-z0-9]+/g, '-')).slice(0, SLUG_MAX))
  return slug === '' ? FALLBACK : slug
}

function withSuffix(base: string, n: number): string {
  const suffix = `-${n}`
  // The base gives way to the suffix so a collision on an 80-character slug stays within the limit.
  const head = trimHyphens(base.slice(0, SLUG_MAX - suffix.length))
  return `${head === '' ? FALLBACK : head}${suffix}`
}

// The stem covers suffixes up to -9999999: far more prompts of one name than a workspace holds.
const STEM_SUFFIX_DIGITS = 7

/**
 * What every candidate of `base` (base, base-2, ... base-9999999) starts with: the store is asked
 * once for the slugs under it, rather than once per candidate (an import of 2,000 rows with one
 * name asked 2 million times).
 */
export function slugStem(base: string): string {
  return withSuffix(base, 10 ** STEM_SUFFIX_DIGITS - 1).slice(0, -(STEM_SUFFIX_DIGITS + 1))
}

/**
 * The first of base, base-2, base-3, ... not in `taken`, looking from the `from`th (1 is base
 * itself), and its number. Uniqueness under concurrency is the store's job (a unique index):
 * this only picks a likely-free candidate.
 */
export function lowestFreeSlug(
  base: string,
  taken: ReadonlySet<string>,
  from = 1,
): { slug: string; n: number } {
  for (let n = Math.max(1, from); ; n++) {
    const slug = n === 1 ? base : withSuffix(base, n)
    if (!taken.has(slug)) return { slug, n }
  }
}

/**
 * What slug allocations know of a workspace's slugs. One per create; a CSV import keeps one for
 * its run, so that each name's taken slugs are read once and its rows do not scan from base-2.
 */
export class KnownSlugs {
  /** Slugs known to be taken: read from the store, or taken since. */
  readonly taken = new Set<string>()
  /** Stems whose slugs were read from the store. */
  readonly stems = new Set<string>()
  /** Per base, the number from which to look: every lower candidate is in `taken`. */
  readonly from = new Map<string, number>()

  copy(): KnownSlugs {
    const c = new KnownSlugs()
    c.restore(this)
    return c
  }

  /** Back to what `earlier` knew (slugs picked since were not written after all). */
  restore(earlier: KnownSlugs): void {
    const taken = [...earlier.taken]
    const stems = [...earlier.stems]
    const from = [...earlier.from]
    this.taken.clear()
    this.stems.clear()
    this.from.clear()
    for (const s of taken) this.taken.add(s)
    for (const s of stems) this.stems.add(s)
    for (const [base, n] of from) this.from.set(base, n)
  }
}
