import { QueueEvents, type Queue } from 'bullmq'
import type { Redis } from '@threadline/redis'
import { QUEUES, queuePrefix, type QueueName } from './queues.js'

/** How a job ended for good. Neither `result` nor `error`: it was removed before its end was read. */
export interface JobOutcome<R> {
  id: string
  result?: R
  /** Set when the job ended in the failed set (retries exhausted or unrecoverable). */
  error?: string
}

/**
 * Follows the jobs of one queue through BullMQ's events stream: the one watcher of the roles and
 * the CLI. Ask about a job before it is added: an event that came before the question is only
 * found by the state check, up to twice CHECK_AFTER_MS later. The same id, the same promise.
 */
export interface JobWatch<R = unknown> {
  /** Settles once job `id` has stopped occupying a worker: completed, failed, or back for a retry. */
  done(id: string): Promise<void>
  /** Settles with job `id`'s final outcome: its result, or its failure once no retry is left. */
  outcome(id: string): Promise<JobOutcome<R>>
  /** Calls `listener` with every job of the queue that completes from now on (progress, not accounting). */
  onCompleted(listener: (id: string, result: R) => void): void
  /** Jobs asked about and not yet settled. */
  readonly watching: number
  close(): Promise<void>
}

/** Events that end a job's turn at a worker. */
const TURN_ENDS = ['completed', 'failed', 'delayed', 'retries-exhausted'] as const

/**
 * How long a job may be watched before its state is read from the queue: BullMQ's events stream
 * resumes after a reconnect, so an event is only missed when the stream was trimmed meanwhile, or
 * when it came before the question.
 */
const CHECK_AFTER_MS = 5_000

interface Waiter<T> {
  promise: Promise<T>
  resolve: (value: T) => void
  since: number
}

/** Promises by job id, each settled once. */
class Waiters<T> {
  readonly byId = new Map<string, Waiter<T>>()

  get(id: string): Promise<T> {
    let w = this.byId.get(id)
    if (!w) {
      let resolve: (value: T) => void = () => {}
      const promise = new Promise<T>((r) => (resolve = r))
      w = { promise, resolve, since: performance.now() }
      this.byId.set(id, w)
    }
    return w.promise
  }

  settle(id: string, value: T): void {
    const w = this.byId.get(id)
    if (!w) return
    this.byId.delete(id)
    w.resolve(value)
  }

  /** Ids watched longer than CHECK_AFTER_MS, their clocks restarted. */
  due(now: number): string[] {
    const ids: string[] = []
    for (const [id, w] of this.byId) {
      if (now - w.since < CHECK_AFTER_MS) continue
      w.since = now
      ids.push(id)
    }
    return ids
  }
}

/** BullMQ hands the stored JSON text, or the value already parsed, depending on its version. */
function parseResult<R>(value: unknown): R {
  return (typeof value === 'string' ? JSON.parse(value) : value) as R
}

/**
 * Watches queue `name` through BullMQ's events stream, read with a blocking XREAD (on a duplicate
 * of `connection` that BullMQ makes and closes): an end is seen as soon as the worker records it,
 * with no polling; a periodic state check finds what the stream did not say.
 */
export async function watchJobs<R = unknown>(
  queue: Queue,
  name: QueueName,
  prefix: string,
  connection: Redis,
): Promise<JobWatch<R>> {
  // From the events stream's current end, not from whatever end the first blocking read finds: a
  // job added in between would otherwise end unseen.
  const tail = (await connection.xrevrange(queue.toKey('events'), '+', '-', 'COUNT', 1)) as Array<
    [string, string[]]
  >
  const events = new QueueEvents(QUEUES[name].name, {
    connection,
    prefix: queuePrefix(prefix, name, connection),
    lastEventId: tail[0]?.[0] ?? '0-0',
  })
  const turns = new Waiters<void>()
  const finals = new Waiters<JobOutcome<R>>()
  const listeners: Array<(id: string, result: R) => void> = []
  events.on('error', () => {})
  for (const event of TURN_ENDS) {
    events.on(event, ({ jobId }: { jobId: string }) => turns.settle(jobId, undefined))
  }
  events.on('completed', ({ jobId, returnvalue }) => {
    const result = parseResult<R>(returnvalue)
    finals.settle(jobId, { id: jobId, result })
    for (const listener of listeners) listener(jobId, result)
  })
  events.on('failed', ({ jobId, failedReason }) => {
    finals.settle(jobId, { id: jobId, error: failedReason })
  })
  await events.waitUntilReady()

  let checking = false
  const check = async () => {
    if (checking) return
    checking = true
    try {
      const now = performance.now()
      for (const id of turns.due(now)) {
        const state = await queue.getJobState(id)
        if (state !== 'waiting' && state !== 'active' && state !== 'prioritized') {
          turns.settle(id, undefined)
        }
      }
      for (const id of finals.due(now)) {
        const job = await queue.getJob(id)
        if (!job)
          finals.settle(id, { id }) // removed after completion: its result is gone
        else if (await job.isCompleted()) {
          finals.settle(id, { id, result: job.returnvalue as R })
        } else if (await job.isFailed()) finals.settle(id, { id, error: job.failedReason })
      }
    } catch {
      // Redis unreachable: the next pass asks again.
    } finally {
      checking = false
    }
  }
  const timer = setInterval(() => void check(), CHECK_AFTER_MS)
  timer.unref()

  return {
    done: (id) => turns.get(id),
    outcome: (id) => finals.get(id),
    onCompleted(listener) {
      listeners.push(listener)
    },
    get watching() {
      return turns.byId.size + finals.byId.size
    },
    async close() {
      clearInterval(timer)
      for (const id of [...turns.byId.keys()]) turns.settle(id, undefined)
      for (const id of [...finals.byId.keys()]) finals.settle(id, { id })
      await events.close()
    },
  }
}
