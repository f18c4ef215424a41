import type { Logger } from '@threadline/logger'
import { redisMemoryShare, type Redis } from '@threadline/redis'
import { sleep } from './pacer.js'

export interface RedisRoomOptions {
  /** Share of `maxmemory` at which adding stops (default 0.8). */
  pauseAt?: number
  /** Share below which it starts again (default 0.6): writers drain well before the next pause. */
  resumeAt?: number
  /** How often Redis is asked while paused, and at most how often otherwise (default 500 ms). */
  sampleMs?: number
}

/**
 * Keeps the ingest's writes below Redis's `maxmemory` (docs/architecture.md, "Backpressure"). A
 * Redis at its limit refuses every script, BullMQ's job completions included, so a queue filled to
 * the limit could never drain: the ingest stops adding jobs well below it, which leaves writers the
 * room to finish theirs. While it waits the stream reader stops reading; a window the upstream
 * drops meanwhile is recovered like any other when the stream comes back.
 */
export class RedisRoom {
  private readonly pauseAt: number
  private readonly resumeAt: number
  private readonly sampleMs: number
  /** The last reading and when it was taken: a batch add must not cost a second round trip. */
  private last = { share: 0, at: -Infinity }
  private pausedSince: number | undefined

  constructor(
    private readonly redis: Redis,
    private readonly logger: Logger,
    options: RedisRoomOptions = {},
  ) {
    this.pauseAt = options.pauseAt ?? 0.8
    this.resumeAt = options.resumeAt ?? 0.6
    this.sampleMs = options.sampleMs ?? 500
  }

  /** True while adding is paused. */
  get paused(): boolean {
    return this.pausedSince !== undefined
  }

  /** Resolves when there is room to add a job; rejects only when `signal` aborts. */
  async wait(signal: AbortSignal): Promise<void> {
    while ((await this.share()) >= (this.paused ? this.resumeAt : this.pauseAt)) {
      if (!this.paused) {
        this.pausedSince = Date.now()
        this.logger.warn(
          { share: Number(this.last.share.toFixed(2)), pauseAt: this.pauseAt },
          'Redis is nearly full (maxmemory): adding jobs paused until writers drain it',
        )
      }
      await sleep(this.sampleMs, signal)
    }
    if (this.pausedSince !== undefined) {
      this.logger.info(
        { pausedMs: Date.now() - this.pausedSince },
        'Redis has room again: adding jobs',
      )
      this.pausedSince = undefined
    }
  }

  /** The share of maxmemory in use, read at most every sampleMs; 0 when unknown or unlimited. */
  private async share(): Promise<number> {
    if (Date.now() - this.last.at < this.sampleMs) return this.last.share
    let share = 0
    try {
      share = (await redisMemoryShare(this.redis)) ?? 0
    } catch {
      // Unreachable: the add itself fails and is retried (Batcher); nothing to measure here.
    }
    this.last = { share, at: Date.now() }
    return share
  }
}
