import type { Queue } from 'bullmq'

/** What an operator watches of one queue (docs/operations.md). */
export interface QueueStats {
  waiting: number
  active: number
  delayed: number
  failed: number
  /** Creation time (ms) of the job next in line, undefined when nothing waits. */
  oldestWaitingAt: number | undefined
}

/**
 * Counts of one queue and the creation time of its oldest waiting job. BullMQ pushes new jobs on
 * the left of the `wait` list and workers take from the right, so the right end is the oldest; only
 * its `timestamp` field is read (a posts job's payload can be megabytes).
 */
export async function queueStats(queue: Queue): Promise<QueueStats> {
  const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed')
  const client = await queue.client
  const [oldestId] = await client.lrange(queue.toKey('wait'), -1, -1)
  let oldestWaitingAt: number | undefined
  if (oldestId) {
    const timestamp = await client.hget(queue.toKey(oldestId), 'timestamp')
    const ms = Number(timestamp)
    if (timestamp && Number.isFinite(ms)) oldestWaitingAt = ms
  }
  return {
    waiting: counts.waiting ?? 0,
    active: counts.active ?? 0,
    delayed: counts.delayed ?? 0,
    failed: counts.failed ?? 0,
    oldestWaitingAt,
  }
}
