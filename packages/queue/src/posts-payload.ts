import type { Job, Queue } from 'bullmq'
import type { PostsJob } from './queues.js'

export interface PostsBatch {
  /**
   * Names the job; BullMQ ignores a second add of a job id it holds, so a retry after an add whose
   * reply was lost does not queue the batch twice. Default: BullMQ's own id.
   */
  id?: string
  source: string
  observed_at: string
  /** Text, or the UTF-8 bytes the upstream sent (decoded here: a job is JSON). */
  lines: readonly (string | Buffer)[]
}

/** Adds a `posts` job for `batch`: its lines travel inside the job. */
export async function addPostsBatch(
  queue: Queue<PostsJob>,
  batch: PostsBatch,
): Promise<Job<PostsJob>> {
  const { id, source, observed_at: observedAt } = batch
  const lines = batch.lines.map((line) => (typeof line === 'string' ? line : line.toString('utf8')))
  return queue.add('posts', { source, observed_at: observedAt, lines }, { jobId: id })
}
