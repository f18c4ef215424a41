import { Prng } from './prng.js'
import { drawWithdrawal } from './withdrawal-mix.js'
import { WithdrawalStates } from './withdrawal-states.js'
import type { JobResult, WithdrawalEvent } from './withdrawal-event.js'
import type { World } from './world.js'

export type {
  JobResult,
  TweetWithdrawal,
  UserWithdrawal,
  WithdrawalEvent,
} from './withdrawal-event.js'

export interface Withdrawals {
  /** Events kept, in event_at order (the newest EVENT_LIMIT). */
  readonly size: number
  /** Events of `kind` whose event_at is in [fromMs, toMs), oldest first. */
  between(kind: 'tweet' | 'user', fromMs: number, toMs?: number): WithdrawalEvent[]
  /** Calls `fn` with every event from now on; returns the unsubscriber. */
  onEvent(fn: (e: WithdrawalEvent) => void): () => void
  /** One random event of the world's mix, now (the timer calls this). */
  step(atMs?: number): WithdrawalEvent | undefined
  /** Withdraws on demand (tests, benchmarks): the event is applied to the world and streamed. */
  apply(event: Omit<WithdrawalEvent, 'eventAt'> & { eventAt?: string }): WithdrawalEvent
  /** Deletes a Post now. */
  deletePost(id: string, atMs?: number): WithdrawalEvent
  /** Why a Post is not served, if it is not: its own delete or drop, or its author's state. */
  postState(id: string, authorId?: string): JobResult['reason'] | undefined
  /** Why a user is not served, if they are not. */
  userState(id: string): JobResult['reason'] | undefined
  /** The withheld countries of a Post (its own or its author's), if any. */
  withheld(id: string, authorId?: string): string[] | undefined
  /** Batch job results: a line for each id that is deleted, protected, suspended or deactivated. */
  jobResults(kind: 'tweets' | 'users', ids: Iterable<string>): JobResult[]
}

/** Events kept for replays (`backfill_minutes`, start_time): bounds a long-running simulator. */
const EVENT_LIMIT = 200_000

/**
 * The world's withdrawals (docs/architecture.md, "Compliance"): Posts deleted, dropped, withheld and
 * edited, users protected, suspended, deleted, withheld and geo-scrubbed, and their reversals, drawn
 * from their own seeded generator so the world's Posts stay what they were (withdrawal-mix.ts).
 * Posts of the demo conversations are picked often, so a demo shows a deletion in its tree.
 */
export function createWithdrawals(world: World, seed: number): Withdrawals {
  const prng = new Prng(seed ^ 0x5eed)
  const states = new WithdrawalStates(world)
  const events: WithdrawalEvent[] = []
  const listeners = new Set<(e: WithdrawalEvent) => void>()
  const at = (ms: number) => new Date(ms).toISOString()

  function record(e: WithdrawalEvent): WithdrawalEvent {
    states.apply(e)
    // Kept in event_at order (an event may be dated back): replays bisect on it.
    let i = events.length
    while (i > 0 && events[i - 1]!.eventAt > e.eventAt) i--
    events.splice(i, 0, e)
    if (events.length > EVENT_LIMIT) events.splice(0, events.length - EVENT_LIMIT)
    for (const fn of listeners) fn(e)
    return e
  }

  return {
    get size() {
      return events.length
    },
    between(kind, fromMs, toMs = Infinity) {
      let lo = 0
      let hi = events.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (Date.parse(events[mid]!.eventAt) < fromMs) lo = mid + 1
        else hi = mid
      }
      const out: WithdrawalEvent[] = []
      for (let i = lo; i < events.length; i++) {
        const e = events[i]!
        if (Date.parse(e.eventAt) >= toMs) break
        if (e.kind === kind) out.push(e)
      }
      return out
    },
    onEvent(fn) {
      listeners.add(fn)
      return () => listeners.delete(fn)
    },
    step(atMs = Date.now()) {
      const e = drawWithdrawal(world, prng, states, atMs)
      return e ? record(e) : undefined
    },
    apply: (e) => record({ ...e, eventAt: e.eventAt ?? at(Date.now()) }),
    deletePost(id, atMs = Date.now()) {
      const authorId = world.get(id)?.authorId
      const author = authorId ? { authorId } : {}
      return record({ kind: 'tweet', id, ...author, action: 'delete', eventAt: at(atMs) })
    },
    postState: (id, authorId) => states.postState(id, authorId),
    userState: (id) => states.userState(id),
    withheld: (id, authorId) => states.withheld(id, authorId),
    jobResults: (kind, ids) => states.jobResults(kind, ids),
  }
}
