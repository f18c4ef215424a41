import type { Logger } from '@threadline/logger'

export interface BatcherOptions {
  maxItems: number
  maxMs: number
  /** Also closes a batch at this many characters, so that one job's payload stays bounded. */
  maxBytes?: number
  /** Wait between attempts to hand a batch on while the queue is unreachable. */
  retryMs?: number
  maxRetryMs?: number
}

/** Hands a batch on (adds a `posts` job); rejects when it could not. */
export type BatchSink<L> = (lines: L[], observedAt: string) => Promise<void>

/**
 * Groups lines into batches by count and by a time bound. Backpressure: when a batch is full,
 * `add` waits until it (and any batch before it) has been handed on, retrying while the sink
 * fails, so at most two batches are ever held and a caller that awaits `add` stops reading.
 */
export class Batcher<L extends { length: number } = string> {
  private buffer: L[] = []
  private bytes = 0
  private observedAt = ''
  private timer: NodeJS.Timeout | undefined
  private inFlight: Promise<void> = Promise.resolve()
  private closed = false
  private readonly log: Logger

  constructor(
    private readonly sink: BatchSink<L>,
    private readonly options: BatcherOptions,
    logger: Logger,
  ) {
    this.log = logger.child({ component: 'batcher' })
  }

  get pending(): number {
    return this.buffer.length
  }

  async add(line: L): Promise<void> {
    if (this.buffer.length === 0) {
      this.observedAt = new Date().toISOString()
      this.timer = setTimeout(() => void this.flush(), this.options.maxMs)
    }
    this.buffer.push(line)
    this.bytes += line.length
    if (
      this.buffer.length >= this.options.maxItems ||
      this.bytes >= (this.options.maxBytes ?? Infinity)
    ) {
      await this.flush()
    }
  }

  /** Hands on what is buffered; resolves once it (and everything before it) is handed on. */
  flush(): Promise<void> {
    clearTimeout(this.timer)
    this.timer = undefined
    if (this.buffer.length === 0) return this.inFlight
    const lines = this.buffer
    const observedAt = this.observedAt
    this.buffer = []
    this.bytes = 0
    // Batches go out one at a time, in order.
    this.inFlight = this.inFlight.then(() => this.send(lines, observedAt))
    return this.inFlight
  }

  private async send(lines: L[], observedAt: string): Promise<void> {
    const base = this.options.retryMs ?? 200
    for (let attempt = 1; ; attempt++) {
      try {
        await this.sink(lines, observedAt)
        if (attempt > 1) this.log.info({ attempt }, 'queue reachable again; batch handed on')
        return
      } catch (err) {
        if (this.closed) {
          this.log.error({ err, lines: lines.length }, 'batch not handed on at shutdown')
          return
        }
        const delay = Math.min(this.options.maxRetryMs ?? 5_000, base * attempt)
        this.log.warn({ err, attempt, delay }, 'could not add the batch; holding the stream')
        await new Promise((r) => setTimeout(r, delay))
      }
    }
  }

  /** Flushes, giving up on an unreachable queue only after `deadlineMs`. */
  async close(deadlineMs: number): Promise<void> {
    const flushed = this.flush()
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      flushed,
      new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          this.closed = true
          resolve()
        }, deadlineMs)
      }),
    ])
    clearTimeout(timer)
    this.closed = true
  }
}
