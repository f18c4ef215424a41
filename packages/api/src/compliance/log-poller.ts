import { complianceLogHead, complianceLogPage, type Db } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import type { Logger } from '@threadline/logger'

export type LoggedEvent = ComplianceEvent & { seq: string }
export type LogKind = 'tweet' | 'user'

/** Events read per query of the log. */
const PAGE = 1_000

/** One open compliance stream, as the poller sees it. */
export interface LogSubscriber {
  kind: LogKind
  /** Called with each event applied after the subscriber joined, in `seq` order. */
  deliver(event: LoggedEvent): void
}

/**
 * Follows the compliance log for the compliance streams (docs/api.md §8.2): one poller per API
 * process, polling by `seq` every `pollMs` while at least one stream is open, and idle otherwise.
 * A stream joins at the poller's position (returned), replays the log up to it itself, and gets
 * everything after it from here: nothing is missed or sent twice across the hand-over.
 */
export class ComplianceLogPoller {
  private readonly subscribers = new Set<LogSubscriber>()
  /** The last seq read of each kind; undefined while idle. */
  private position: Record<LogKind, string> | undefined
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

  /**
   * Adds a subscriber; resolves to the seq it joins at: it gets every event after it, and replays
   * what it wants up to it itself.
   */
  async join(sub: LogSubscriber): Promise<string> {
    if (this.position === undefined) {
      this.starting ??= complianceLogHead(this.db).finally(() => (this.starting = undefined))
      const head = await this.starting
      this.position ??= { tweet: head, user: head }
    }
    this.subscribers.add(sub)
    this.schedule()
    return this.position[sub.kind]
  }

  leave(sub: LogSubscriber): void {
    this.subscribers.delete(sub)
    if (this.subscribers.size === 0) {
      // Idle: the next stream starts again from the head of the log.
      clearTimeout(this.timer)
      this.timer = undefined
      this.position = undefined
    }
  }

  async close(): Promise<void> {
    this.closed = true
    clearTimeout(this.timer)
    await this.polling
  }

  /** Whether the poller is following the log (some stream is open). */
  get active(): boolean {
    return this.position !== undefined
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
    try {
      for (const kind of ['tweet', 'user'] as const) {
        for (;;) {
          const from = this.position?.[kind]
          if (from === undefined || this.closed) return
          if (![...this.subscribers].some((s) => s.kind === kind)) break
          const page = await complianceLogPage(this.db, { kind, afterSeq: from, limit: PAGE })
          // The position moves with the dispatch, in one step: a stream joining meanwhile gets
          // either all of this page live or none of it.
          const position = this.position
          if (position === undefined || position[kind] !== from) return
          for (const event of page) {
            for (const sub of this.subscribers) if (sub.kind === kind) sub.deliver(event)
          }
          if (page.length > 0) position[kind] = page[page.length - 1]!.seq
          if (page.length < PAGE) break
        }
      }
    } catch (err) {
      this.log.warn({ err }, 'compliance log not read; retrying')
    }
  }
}

/** Whether log position `seq` is past `upTo` (both decimal seqs). */
export const isAfterSeq = (seq: string, upTo: string): boolean => BigInt(seq) > BigInt(upTo)
