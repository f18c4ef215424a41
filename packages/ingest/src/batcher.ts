import { randomUUID } from 'node:crypto'
import type { Logger } from '@threadline/logger'

export interface BatcherOptions {
  maxItems: number
  /** Also closes a batch at this many characters, so that one job's payload stays bounded. */
  maxBytes?: number
  /**
   * Batches handed on and not yet done (see HandedOn) before what arrives gathers into the next
   * one instead of going at once (default 1).
   */
  maxInFlight?: number
  /** Wait between attempts to hand a batch on while the queue is unreachable. */
  retryMs?: number
  maxRetryMs?: number
}

/** A batch the sink handed on: `done` settles once it no longer occupies a writer. */
export interface HandedOn {
  done: Promise<void>
}

/** A batch's identity: made when it closes, the same on every retry of its hand-on. */
export interface BatchId {
  id: string
  /** False on a retry: the first attempt may have left its job or payload behind. */
  firstAttempt: boolean
}

/**
 * Hands a batch on (adds a `posts` job); rejects when it could not. Resolves to what tells when
 * the batch is done, or to nothing when it is done once handed on.
 */
export type BatchSink<L> = (
  lines: L[],
  observedAt: string,
  batch: BatchId,
) => Promise<HandedOn | void>

/** Why batches went: at once (nothing in flight), gathered behind one in flight, or full. */
export interface BatcherCounts {
  atOnce: number
  gathered: number
  full: number
}

/**
 * Groups lines into batches by what is waiting, not by a clock (group commit, see
 * docs/architecture.md): a line that arrives while fewer than `maxInFlight` batches are in flight
 * (handed on and not yet done) goes at once, in a batch of its own; while they are, lines gather
 * into the next batch, which goes as soon as one of them is done, or at once when it reaches
 * `maxItems` or `maxBytes`. So a quiet stream's Post is queued without waiting and a busy stream's
 * batches fill. A line is never held while nothing is in flight.
 *
 * Backpressure: when a batch is full, `add` waits until it (and any batch before it) has been
 * handed on, retrying while the sink fails, so a caller that awaits `add` stops reading.
 */
export class Batcher<L extends { length: number } = string> {
  private buffer: L[] = []
  private bytes = 0
  private observedAt = ''
  /** Batches go to the sink one at a time, in order: the last one handed to it. */
  private handing: Promise<void> = Promise.resolve()
  private inFlight = 0
  private closed = false
  private readonly log: Logger
  private readonly maxInFlight: number
  /** Batches handed on, by why they went (a flush at close counts as gathered). */
  readonly counts: BatcherCounts = { atOnce: 0, gathered: 0, full: 0 }

  constructor(
    private readonly sink: BatchSink<L>,
    private readonly options: BatcherOptions,
    logger: Logger,
  ) {
    this.log = logger.child({ component: 'batcher' })
    this.maxInFlight = Math.max(1, options.maxInFlight ?? 1)
  }

  /** Lines gathered and not yet handed on. */
  get pending(): number {
    return this.buffer.length
  }

  /** Batches handed on (or being handed on) and not yet done. */
  get inFlightBatches(): number {
    return this.inFlight
  }

  async add(line: L): Promise<void> {
    if (this.buffer.length === 0) this.observedAt = new Date().toISOString()
    this.buffer.push(line)
    this.bytes += line.length
    if (
      this.buffer.length >= this.options.maxItems ||
      this.bytes >= (this.options.maxBytes ?? Infinity)
    ) {
      await this.ship('full')
    } else if (this.inFlight < this.maxInFlight) {
      // Idle: the line goes now. What arrives while it is handed on gathers behind it.
      void this.ship('atOnce')
    }
  }

  /** Hands on what is buffered; resolves once it (and everything before it) is handed on. */
  flush(): Promise<void> {
    return this.ship('gathered')
  }

  private ship(why: keyof BatcherCounts): Promise<void> {
    if (this.buffer.length === 0) return this.handing
    this.counts[why] += 1
    const lines = this.buffer
    const observedAt = this.observedAt
    this.buffer = []
    this.bytes = 0
    this.inFlight += 1
    const id = randomUUID()
    this.handing = this.handing.then(() => this.send(lines, observedAt, id))
    return this.handing
  }

  /** One batch is done: what gathered meanwhile goes now, if the bound allows. */
  private readonly settled = (): void => {
    this.inFlight -= 1
    if (this.inFlight < this.maxInFlight && this.buffer.length > 0) void this.ship('gathered')
  }

  private async send(lines: L[], observedAt: string, id: string): Promise<void> {
    const base = this.options.retryMs ?? 200
    for (let attempt = 1; ; attempt++) {
      try {
        const handed = await this.sink(lines, observedAt, { id, firstAttempt: attempt === 1 })
        if (attempt > 1) this.log.info({ attempt }, 'queue reachable again; batch handed on')
        if (handed) handed.done.then(this.settled, this.settled)
        else this.settled()
        return
      } catch (err) {
        if (this.closed) {
          this.log.error({ err, lines: lines.length }, 'batch not handed on at shutdown')
          this.settled()
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
