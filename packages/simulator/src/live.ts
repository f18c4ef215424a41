import type { StreamHub } from './stream.js'

export interface LiveOptions {
  /** New Posts per second; 0: none on their own. */
  rate: number
  /** Stops after this many Posts, made only while a stream listens; unset: never stops. */
  stopAfter?: number
  /** Withdrawals per minute; 0: none on their own. */
  withdrawalsPerMinute: number
}

export interface LiveDeps {
  hub: Pick<StreamHub, 'blocked' | 'size'>
  /** Makes `count` Posts at `atMs` and streams them. */
  make(count: number, atMs: number): void
  /** Makes one withdrawal of the world's mix. */
  withdraw(): void
}

/** The world's life on its own once the simulator listens: Posts at `rate`, withdrawals. */
export class LiveGeneration {
  private timer: NodeJS.Timeout | undefined
  private withdrawalTimer: NodeJS.Timeout | undefined
  private baseMs = 0
  private madeSinceBase = 0
  private madeLive = 0

  constructor(
    private readonly deps: LiveDeps,
    private readonly options: LiveOptions,
  ) {}

  start(): void {
    const { rate, withdrawalsPerMinute } = this.options
    if (rate > 0) {
      this.baseMs = Date.now()
      this.madeSinceBase = 0
      const everyMs = rate >= 100 ? 10 : Math.min(100, Math.max(10, 1000 / rate))
      this.timer = setInterval(() => this.tick(), everyMs)
    }
    if (withdrawalsPerMinute > 0) {
      this.withdrawalTimer = setInterval(() => this.deps.withdraw(), 60_000 / withdrawalsPerMinute)
    }
  }

  stop(): void {
    clearInterval(this.timer)
    clearInterval(this.withdrawalTimer)
  }

  /** Makes the Posts due since the last tick, all in one batch. */
  private tick(): void {
    const { hub } = this.deps
    const { rate, stopAfter } = this.options
    const now = Date.now()
    // A fixed-count run (stopAfter) makes its Posts for a reader: none are made while none listens.
    if (hub.blocked || (stopAfter !== undefined && hub.size === 0)) {
      // Generation waits for the reader; restart the schedule so it does not burst afterwards.
      this.baseMs = now
      this.madeSinceBase = 0
      return
    }
    const due = Math.floor(((now - this.baseMs) * rate) / 1000) - this.madeSinceBase
    if (due <= 0) return
    const left = (stopAfter ?? Infinity) - this.madeLive
    const count = Math.min(due, Math.max(1, Math.ceil(rate / 10)), left)
    if (count <= 0) {
      clearInterval(this.timer)
      return
    }
    this.madeSinceBase += count
    this.madeLive += count
    this.deps.make(count, now)
    if (due > count * 4) {
      // Too far behind (a long pause of the event loop): drop the backlog instead of a burst.
      this.baseMs = now
      this.madeSinceBase = 0
    }
  }
}
