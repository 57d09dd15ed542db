import type { Resolver } from './services/resolver.ts'

/** What the render routes are given; route files import this, never app.ts. */
export interface RenderDeps {
  resolver: Resolver
  /** RENDER_MAX_OUTPUT_BYTES. */
  maxOutputBytes: number
  /** Told of each invocation a split's variant served (DESIGN section 15). */
  countVariant?: (splitId: string, variant: number) => void
}
