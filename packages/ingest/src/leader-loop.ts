import type { Logger } from '@threadline/logger'
import type { BatcherCounts } from './batcher.js'
import { runLeadership, type Leading, type LeadershipDeps } from './leadership.js'
import type { RuleSync } from './jobs/sync-rules.js'
import type { StreamEvent, StreamStats } from './stream-reader.js'

/**
 * This replica's bid for the leader lease: each leadership it wins runs until the lease is lost,
 * then it bids again, until `closing` aborts. It shows the running leadership for the ingest's stats,
 * and the last one's reader counts between leaderships.
 */
export class LeaderLoop {
  private readonly listeners = new Set<(e: StreamEvent) => void>()
  private leading: Leading | undefined
  private batches: BatcherCounts = { atOnce: 0, gathered: 0, full: 0 }
  private lastReaderStats: StreamStats = { connects: 0, lines: 0, keepAlives: 0, errorLines: 0 }
  private running: Promise<void> | undefined

  constructor(
    private readonly deps: Omit<LeadershipDeps, 'streamListeners'>,
    private readonly closing: AbortSignal,
    private readonly log: Logger,
  ) {}

  start(): void {
    this.running = this.lead().catch((err: unknown) =>
      this.log.error({ err }, 'leader loop failed'),
    )
  }

  /** Resolves once the loop has ended (after `closing` aborts); at once when it never started. */
  async stopped(): Promise<void> {
    await this.running
  }

  /** The running leadership's stream reader counts, else the last one's. */
  readerStats(): StreamStats {
    return this.leading?.reader.stats ?? this.lastReaderStats
  }

  /** The stream's batches by why they were queued, in the running (or last) leadership. */
  streamBatches(): BatcherCounts {
    return { ...this.batches }
  }

  /** The running leadership's rule sync. */
  get ruleSync(): RuleSync | undefined {
    return this.leading?.ruleSync
  }

  /** Stream events of the running leadership's reader and of every later one. */
  onStreamEvent(fn: (e: StreamEvent) => void): () => void {
    this.listeners.add(fn)
    const off = this.leading?.reader.onEvent(fn)
    return () => {
      this.listeners.delete(fn)
      off?.()
    }
  }

  private async lead(): Promise<void> {
    const { lease } = this.deps
    const deps: LeadershipDeps = { ...this.deps, streamListeners: this.listeners }
    while (!this.closing.aborted) {
      if (!(await lease.acquire(this.closing))) return
      this.log.info('leading: rule sync and the upstream stream run here')
      try {
        await runLeadership(deps, this.closing, (now) => this.show(now))
      } catch (err) {
        this.log.error({ err }, 'leader duties failed; stepping down')
      }
      await lease.release()
    }
  }

  private show(now: Leading | undefined): void {
    if (now) this.batches = now.streamBatches
    else if (this.leading) this.lastReaderStats = { ...this.leading.reader.stats }
    this.leading = now
  }
}
