import type { Granularity } from '@threadline/db'

const DAY_MS = 86_400_000

/**
 * The longest span one counts page covers (docs/api.md §2.6): 31 days of hours or days, 7 days of
 * minutes. It bounds the buckets of any answer (at most 10,081), whatever the window or the token.
 */
const PAGE_SPAN_MS: Record<Granularity, number> = {
  minute: 7 * DAY_MS,
  hour: 31 * DAY_MS,
  day: 31 * DAY_MS,
}

export interface CountsPage {
  start: Date
  end: Date
  /** The position of the next (older) page, when the window goes on before this one. */
  next?: number
}

/**
 * The page of a counts window to answer: the newest span, or the span ending at a token's position.
 * A position is the start of a page answered before, so it lies strictly inside the window; any
 * other (a token signed with a leaked secret) gives undefined, for the route's invalid-token 400.
 */
export function countsPage(
  window: { start: Date; end: Date },
  granularity: Granularity,
  position?: number,
): CountsPage | undefined {
  const startMs = window.start.getTime()
  const endMs = window.end.getTime()
  if (position !== undefined && !(position > startMs && position < endMs)) return undefined
  const pageEnd = position ?? endMs
  const pageStart = Math.max(startMs, pageEnd - PAGE_SPAN_MS[granularity])
  return {
    start: new Date(pageStart),
    end: new Date(pageEnd),
    next: pageStart > startMs ? pageStart : undefined,
  }
}
