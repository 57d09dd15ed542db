import { AppError } from '@pm/contracts'

/**
 * At most `max` model calls of one organization in flight at once, in this replica
 * (docs/decisions.md, "Runs": per replica, not across replicas).
 */
export class OrgLimiter {
  private readonly inFlight = new Map<string, number>()

  private readonly max: number

  constructor(max: number) {
    this.max = max
  }

  /** Takes a slot or throws 429 RUNS_BUSY; the answer gives the slot back (once). */
  acquire(organizationId: string): () => void {
    const n = this.inFlight.get(organizationId) ?? 0
    if (n >= this.max) {
      throw new AppError(
        'RUNS_BUSY',
        `at most ${this.max} model calls of an organization at once; try again when one has finished`,
        { limit: this.max },
        { 'retry-after': '1' },
      )
    }
    this.inFlight.set(organizationId, n + 1)
    let released = false
    return () => {
      if (released) return
      released = true
      const left = (this.inFlight.get(organizationId) ?? 1) - 1
      if (left <= 0) this.inFlight.delete(organizationId)
      else this.inFlight.set(organizationId, left)
    }
  }
}
