import { QueueEvents, type Queue } from 'bullmq'
import type { Redis } from '@threadline/redis'

export interface TrackedOutcome<R> {
  id: string
  result?: R
  /** Set when the job ended in the failed set (retries exhausted or unrecoverable). */
  error?: string
}

/**
 * Follows a set of jobs to completion: QueueEvents for prompt news, plus a periodic check of the
 * jobs not heard of (events are fire-and-forget; a job may finish before the listener attaches, or be
 * removed by removeOnComplete). Create it BEFORE adding the jobs it will follow.
 */
export class JobTracker<R> {
  private readonly events: QueueEvents
  private readonly connection: Redis
  private readonly pending = new Set<string>()
  private readonly done = new Map<string, TrackedOutcome<R>>()
  private wake: (() => void) | undefined

  constructor(
    private readonly queue: Queue,
    connection: Redis,
    private readonly onOutcome: (outcome: TrackedOutcome<R>) => void = () => {},
  ) {
    // QueueEvents blocks on its connection, so it gets its own; BullMQ does not close connections
    // it was handed, so close() does.
    this.connection = connection.duplicate()
    this.events = new QueueEvents(queue.name, {
      connection: this.connection,
      prefix: queue.opts.prefix,
    })
    this.events.on('error', () => {})
    this.events.on('completed', ({ jobId, returnvalue }) => {
      this.finish({ id: jobId, result: returnvalue as R })
    })
  }

  async ready(): Promise<void> {
    await this.events.waitUntilReady()
  }

  follow(id: string): void {
    if (!this.done.has(id)) this.pending.add(id)
  }

  private finish(outcome: TrackedOutcome<R>): void {
    if (!this.pending.delete(outcome.id)) return
    this.done.set(outcome.id, outcome)
    this.onOutcome(outcome)
    if (this.pending.size === 0) this.wake?.()
  }

  get remaining(): number {
    return this.pending.size
  }

  private async sweep(): Promise<void> {
    for (const id of [...this.pending]) {
      const job = await this.queue.getJob(id)
      if (!job) {
        this.finish({ id }) // removed after completion: its result is gone, not the work
      } else if (await job.isCompleted()) {
        this.finish({ id, result: job.returnvalue as R })
      } else if (await job.isFailed()) {
        this.finish({ id, error: job.failedReason })
      }
    }
  }

  /** Resolves when every followed job has an outcome. */
  async wait(sweepEveryMs = 2_000): Promise<TrackedOutcome<R>[]> {
    while (this.pending.size > 0) {
      let timer: NodeJS.Timeout | undefined
      await new Promise<void>((resolve) => {
        this.wake = resolve
        timer = setTimeout(resolve, sweepEveryMs)
      })
      clearTimeout(timer)
      if (this.pending.size > 0) await this.sweep()
    }
    return [...this.done.values()]
  }

  async close(): Promise<void> {
    await this.events.close()
    this.connection.disconnect()
  }
}
