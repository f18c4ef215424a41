import { compareIds, snowflakeAt, snowflakeTime } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { recoverJobId, type RecoverJob } from './jobs/recover-window.js'
import { newestId, type MarkStore, type StreamMark } from './stream-mark.js'

/** Search starts this long before the mark: Posts made just before it may still have been in flight. */
const SINCE_MARGIN_MS = 10_000
/** A `backfill_minutes` replay must cover the window with this much to spare. */
const REPLAY_MARGIN_MS = 15_000
/** Recent search reaches back seven days; an older mark searches from just inside that. */
const RECENT_REACH_MS = 7 * 86_400_000 - 10 * 60_000
/** Between attempts to record a window while Redis refuses (full, or away). */
const ENQUEUE_RETRY_MS = 500

export interface WindowRecoveryDeps {
  marks: MarkStore
  /** Adds the search job of a window (idempotent under its job id). */
  enqueue: (jobId: string, job: RecoverJob) => Promise<void>
  logger: Logger
  metrics?: IngestMetrics
  options: {
    /** The `backfill_minutes` asked for when the window fits in it (0: never ask). */
    backfillMinutes: number
    search: 'recent' | 'all'
  }
}

/**
 * Recovery of what the stream missed, for one leadership (docs/architecture.md, "Recovery"). Before
 * each connection it plans: a window that fits in `backfill_minutes` is asked for as a replay,
 * unless the upstream refused the parameter; any other window becomes a search job, recorded
 * before the first line of the new connection is read, so the mark cannot move past an unrecorded
 * window, and a replica that takes over finds the window in the queue or starts from the mark.
 */
export class WindowRecovery {
  private readonly log: Logger
  /** The newest mark this replica knows (its own batches, or Redis at the last plan). */
  private known: StreamMark | undefined
  private refused = false
  /** Where the window planned for the next connection starts. */
  private start: StreamMark | undefined
  /**
   * When this leadership began: the window start while there is no mark, since the rules it places
   * upstream may match Posts before its first connection is open.
   */
  private readonly ledSince = Date.now()

  constructor(private readonly deps: WindowRecoveryDeps) {
    this.log = deps.logger.child({ component: 'recovery' })
  }

  /** The `backfill_minutes` to ask for on the next connection (0: none). Never rejects. */
  async plan(): Promise<number> {
    try {
      const { mark, refused } = await this.deps.marks.read()
      if (mark && (!this.known || compareIds(mark.id, this.known.id) > 0)) this.known = mark
      if (refused) this.refused = true
    } catch (err) {
      this.log.warn(
        { err },
        'could not read the stream mark; planning from what this replica knows',
      )
    }
    // Without a mark the window since this leadership began is searched; a replay is asked for
    // only on a reconnect, as X's clients do.
    this.start = this.known ?? { id: snowflakeAt(new Date(this.ledSince)), at: this.ledSince }
    const { backfillMinutes } = this.deps.options
    if (!this.known || this.refused || backfillMinutes === 0) return 0
    const window = Date.now() - this.start.at + REPLAY_MARGIN_MS
    return window <= backfillMinutes * 60_000 ? backfillMinutes : 0
  }

  /** The upstream refused `backfill_minutes`: never asked again (remembered in Redis too). */
  refusedBackfill(): void {
    if (!this.refused) this.log.warn('the upstream refuses backfill_minutes; recovering by search')
    this.refused = true
    this.deps.marks.refuse().catch((err: unknown) => {
      this.log.warn({ err }, 'could not record the refusal of backfill_minutes')
    })
  }

  /**
   * The stream is back: a window replayed by `backfill_minutes` is counted; any other is recorded
   * as a search job, retried until Redis takes it (the stream waits meanwhile) or `signal` aborts.
   */
  async connected(backfillMinutes: number, signal: AbortSignal): Promise<void> {
    const now = Date.now()
    const start = this.start
    this.start = undefined
    if (!start) return
    if (backfillMinutes > 0) {
      this.deps.metrics?.windowRecovered('backfill_minutes', 0, 0)
      this.log.info({ windowMs: now - start.at, backfillMinutes }, 'window asked for as a replay')
      return
    }
    const job = this.searchJob(start, now)
    for (let attempt = 1; !signal.aborted; attempt++) {
      try {
        await this.deps.enqueue(recoverJobId(now), job)
        this.log.info({ windowMs: now - start.at, ...job }, 'window queued for recovery by search')
        return
      } catch (err) {
        this.log.warn({ err, attempt }, 'could not queue the window; holding the stream')
        await new Promise((r) => setTimeout(r, Math.min(5_000, ENQUEUE_RETRY_MS * attempt)))
      }
    }
  }

  private searchJob(start: StreamMark, now: number): RecoverJob {
    const made = snowflakeTime(start.id)?.getTime()
    const from = Math.min(made ?? start.at, start.at) - SINCE_MARGIN_MS
    const until_at = new Date(now).toISOString()
    if (this.deps.options.search === 'recent' && now - from > RECENT_REACH_MS) {
      return { start_time: new Date(now - RECENT_REACH_MS).toISOString(), until_at }
    }
    const since_id = made === undefined ? start.id : snowflakeAt(new Date(from))
    return { since_id, until_at }
  }

  /** A batch of stream lines was queued: the mark moves to its newest Post. */
  async queued(lines: readonly Buffer[], observedAt: string): Promise<void> {
    const id = newestId(lines)
    if (id === undefined) return
    const mark = { id, at: Date.parse(observedAt) }
    if (!this.known || compareIds(id, this.known.id) > 0) this.known = mark
    await this.deps.marks.advance(mark)
  }
}
