import { hash } from 'node:crypto'
import type { Split } from '@pm/contracts'

/** Resolution of the pick: 10,000 buckets, so a weight of 1 % is 100 buckets. */
const BUCKETS = 10_000

/**
 * The bucket (0..9999) of a subject in a split: a stable hash of (promptId, env, subject, split
 * id), so one subject keeps its variant for as long as the split stands and a new split
 * reshuffles. SHA-1 is used for its spread, not its secrecy.
 */
export function subjectBucket(promptId: string, env: string, subject: string, splitId: string): number {
  const digest = hash('sha1', `${promptId}\u0000${env}\u0000${splitId}\u0000${subject}`, 'hex')
  return Number.parseInt(digest.slice(0, 8), 16) % BUCKETS
}

/** The variant whose share of the buckets (by weight, in order) holds `bucket`. */
export function variantOfBucket(split: Pick<Split, 'variants'>, bucket: number): number {
  let upTo = 0
  for (let i = 0; i < split.variants.length; i++) {
    upTo += (split.variants[i]?.weight ?? 0) * (BUCKETS / 100)
    if (bucket < upTo) return i
  }
  return split.variants.length - 1
}

/** The variant for this request: sticky with a subject, random per request without one. */
export function pickVariant(
  split: Pick<Split, 'id' | 'variants'>,
  promptId: string,
  env: string,
  subject: string | undefined,
  random: () => number = Math.random,
): number {
  const bucket =
    subject === undefined ? Math.floor(random() * BUCKETS) : subjectBucket(promptId, env, subject, split.id)
  return variantOfBucket(split, bucket)
}
