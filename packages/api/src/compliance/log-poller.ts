import { complianceLogHead, complianceLogPage, type Db } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import type { Logger } from '@threadline/logger'

export type LoggedEvent = ComplianceEvent & { seq: string }
export type LogKind = 'tweet' | 'user'

/** Events read per query of the log. */
const PAGE = 1_000

/**
 * How long a read of the log may still be missing an event below its highest seq: a `seq` is
 * taken when a transaction inserts the event, so a transaction that commits later than another
 * with a higher seq shows its event late. Every poll reads again from the highest seq read this
 * long ago, and sends only what it has not sent.
 */
export const SETTLE_MS = 5_000

/** One open compliance stream, as the poller sees it. */
export interface LogSubscriber {
  kind: LogKind
  /** Called with each event the poller reads after the subscriber joined, once. */
  deliver(event: LoggedEvent): void
}

/** Where a stream joins the poller. */
export interface JoinPoint {
  /** The highest seq read: the stream replays up to it itself (when it replays). */
  upTo: string
  /** Seqs at or below this are never delivered live again: a replay remembers only those above. */
  settled: string
}

const maxSeq = (a: string, b: string) => (BigInt(a) >= BigInt(b) ? a : b)

interface KindState {
  /** The highest seq read. */
  high: string
  /** Reads start after this: the highest seq read SETTLE_MS ago. */
  low: string
  /** Seqs above `low` already delivered. */
  sent: Set<string>
}

/**
 * Follows the compliance log for the compliance streams (docs/api.md §8.2): one poller per API
 * process, reading it by `seq` every `pollMs` while at least one stream is open, and idle
 * otherwise. Each event read is delivered once to the streams of its kind; one committed late
 * (below a seq already read) is still delivered while it is within SETTLE_MS.
 */
export class ComplianceLogPoller {
  private readonly subscribers = new Set<LogSubscriber>()
  /** Undefined while idle. */
  private state: Record<LogKind, KindState> | undefined
  /** The highest seqs after each poll, with its time: `low` moves to those SETTLE_MS old. */
  private marks: Array<{ at: number; high: Record<LogKind, string> }> = []
  private starting: Promise<string> | undefined
  private timer: NodeJS.Timeout | undefined
  private polling: Promise<void> | undefined
  private closed = false
  private readonly log: Logger

  constructor(
    private readonly db: Db,
    logger: Logger,
    private readonly pollMs: number,
  ) {
    this.log = logger.child({ component: 'compliance-log-poller' })
  }

  /** Adds a subscriber: it gets every event read from now on (see JoinPoint for a replay). */
  async join(sub: LogSubscriber): Promise<JoinPoint> {
    if (this.state === undefined) {
      this.starting ??= complianceLogHead(this.db).finally(() => (this.starting = undefined))
      const head = await this.starting
      const fresh = (): KindState => ({ high: head, low: head, sent: new Set() })
      this.state ??= { tweet: fresh(), user: fresh() }
    }
    this.subscribers.add(sub)
    this.schedule()
    const s = this.state[sub.kind]
    return { upTo: s.high, settled: s.low }
  }

  leave(sub: LogSubscriber): void {
    this.subscribers.delete(sub)
    if (this.subscribers.size === 0) {
      // Idle: the next stream starts again from the head of the log.
      clearTimeout(this.timer)
      this.timer = undefined
      this.state = undefined
      this.marks = []
    }
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await this.polling
  }

  /** Whether the poller is following the log (some stream is open). */
  get active(): boolean {
    return this.state !== undefined
  }

  private schedule(): void {
    if (this.closed || this.timer || this.polling || this.subscribers.size === 0) return
    this.timer = setTimeout(() => {
      this.timer = undefined
      this.polling = this.poll().finally(() => {
        this.polling = undefined
        this.schedule()
      })
    }, this.pollMs)
    this.timer.unref()
  }

  private async poll(): Promise<void> {
    const state = this.state
    if (!state) return
    try {
      for (const kind of ['tweet', 'user'] as const) {
        if (![...this.subscribers].some((s) => s.kind === kind)) continue
        const s = state[kind]
        let after = s.low
        for (;;) {
          const page = await complianceLogPage(this.db, { kind, afterSeq: after, limit: PAGE })
          if (this.state !== state || this.closed) return
          for (const event of page) {
            if (s.sent.has(event.seq)) continue
            s.sent.add(event.seq)
            s.high = maxSeq(s.high, event.seq)
            for (const sub of this.subscribers) if (sub.kind === kind) sub.deliver(event)
          }
          if (page.length < PAGE) break
          after = page[page.length - 1]!.seq
        }
      }
      this.settle(state)
    } catch (err) {
      this.log.warn({ err }, 'compliance log not read; retrying')
    }
  }

  /** Moves each kind's `low` to its highest seq read SETTLE_MS ago, forgetting what is below. */
  private settle(state: Record<LogKind, KindState>): void {
    const now = Date.now()
    this.marks.push({ at: now, high: { tweet: state.tweet.high, user: state.user.high } })
    let settledMark: (typeof this.marks)[number] | undefined
    while (this.marks.length > 0 && this.marks[0]!.at <= now - SETTLE_MS) {
      settledMark = this.marks.shift()
    }
    if (!settledMark) return
    for (const kind of ['tweet', 'user'] as const) {
      const s = state[kind]
      s.low = maxSeq(s.low, settledMark.high[kind])
      const low = BigInt(s.low)
      for (const seq of s.sent) if (BigInt(seq) <= low) s.sent.delete(seq)
    }
  }
}

/** Whether log position `seq` is past `upTo` (both decimal seqs). */
export const isAfterSeq = (seq: string, upTo: string): boolean => BigInt(seq) > BigInt(upTo)
