import { QueueEvents, type Queue } from 'bullmq'
import type { Redis } from '@threadline/redis'
import { QUEUES, queuePrefix, type QueueName } from './queues.js'

/** Tells when jobs of one queue stop occupying a worker. */
export interface JobWatch {
  /**
   * Settles once job `id` has completed, failed or gone back to wait for a retry. Ask before the
   * job is added: an event that came before the question is not seen. The same id, the same promise.
   */
  done(id: string): Promise<void>
  /** Jobs asked about and not yet done. */
  readonly watching: number
  close(): Promise<void>
}

/** Events that end a job's turn at a worker. */
const ENDS = ['completed', 'failed', 'delayed', 'retries-exhausted'] as const

/**
 * How long a job may be watched before its state is read from the queue: BullMQ's events stream
 * resumes after a reconnect, so an event is only missed when the stream was trimmed meanwhile.
 */
const CHECK_AFTER_MS = 5_000

/**
 * Watches queue `name` through BullMQ's events stream, read with a blocking XREAD (on a duplicate
 * of `connection` that BullMQ makes and closes): an end is seen as soon as the worker records it,
 * with no polling.
 */
export async function watchJobs(
  queue: Queue,
  name: QueueName,
  prefix: string,
  connection: Redis,
): Promise<JobWatch> {
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
  const waiting = new Map<string, { promise: Promise<void>; resolve: () => void; since: number }>()
  const end = (id: string) => {
    const w = waiting.get(id)
    if (!w) return
    waiting.delete(id)
    w.resolve()
  }
  events.on('error', () => {})
  for (const event of ENDS) events.on(event, ({ jobId }: { jobId: string }) => end(jobId))
  await events.waitUntilReady()

  let checking = false
  const check = async () => {
    if (checking) return
    checking = true
    try {
      const now = performance.now()
      for (const [id, w] of waiting) {
        if (now - w.since < CHECK_AFTER_MS) continue
        const state = await queue.getJobState(id)
        if (state === 'waiting' || state === 'active' || state === 'prioritized') {
          w.since = now
        } else {
          end(id)
        }
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
    done(id) {
      let w = waiting.get(id)
      if (!w) {
        let resolve: () => void = () => {}
        const promise = new Promise<void>((r) => (resolve = r))
        w = { promise, resolve, since: performance.now() }
        waiting.set(id, w)
      }
      return w.promise
    },
    get watching() {
      return waiting.size
    },
    async close() {
      clearInterval(timer)
      for (const id of [...waiting.keys()]) end(id)
      await events.close()
    },
  }
}
