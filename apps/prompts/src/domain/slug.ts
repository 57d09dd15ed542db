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

/**
 * The first of base, base-2, base-3, ... that `taken` reports free. Candidates are checked one
 * at a time, in order, so the result is the lowest free suffix; uniqueness under concurrency
 * is the store's job (a unique index), this only picks a likely-free candidate.
 */
export async function uniqueSlug(
  base: string,
  taken: (slug: string) => boolean | Promise<boolean>,
): Promise<string> {
  if (!(await taken(base))) return base
  for (let n = 2; ; n++) {
    const candidate = withSuffix(base, n)
    if (!(await taken(candidate))) return candidate
  }
}
