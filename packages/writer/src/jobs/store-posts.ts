import { storeBatch, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import {
  dropPostsPayload,
  loadPostsLines,
  postsJobSchema,
  type Job,
  type PostsJob,
  type PostsJobResult,
} from '@threadline/queue'
import type { Redis } from '@threadline/redis'
import type { Publisher } from '../publish.js'
import type { RecentlyStored } from '../recent.js'
import { storeLines } from '../store-lines.js'

export interface StorePostsDeps {
  db: Db
  redis: Redis
  logger: Logger
  metrics?: WriterMetrics
  publisher: Publisher
  recent?: RecentlyStored
}

const NOTHING: PostsJobResult = { inserted: 0, updated: 0, users: 0, rejects: 0, lines: 0 }

/**
 * The `posts` job: parse → normalize and store (one transaction) → publish → drop the payload.
 * Run again after its batch committed (a writer that died before BullMQ marked it done), it
 * stores, keeps and publishes nothing twice: Posts and counters by their keys, rejects by the job
 * id, the outbox by what the statement newly stored.
 */
export function storePostsJob(deps: StorePostsDeps) {
  const { db, redis, metrics, publisher, recent } = deps
  const log = deps.logger

  /** A job we cannot read is kept where operators look, not retried forever. */
  const rejectJob = async (job: Job<PostsJob, PostsJobResult>, issues: string) => {
    const raw = JSON.stringify(job.data ?? null).replaceAll('\\u0000', '\\\\u0000')
    const reason = `invalid posts job ${job.id}: ${issues}`
    const rejected = { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }
    const { rejects } = await storeBatch(db, rejected, 'queue', job.id)
    log.warn({ jobId: job.id }, reason)
    metrics?.batchInvalid()
    return { ...NOTHING, rejects }
  }

  return async (job: Job<PostsJob, PostsJobResult>): Promise<PostsJobResult> => {
    const parsed = postsJobSchema.safeParse(job.data)
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`)
      return rejectJob(job, issues.join('; '))
    }
    const { observed_at: observedAt, source } = parsed.data
    const started = performance.now()
    const lines = await loadPostsLines(redis, parsed.data)
    if (lines === undefined) {
      // Only a writer that committed this batch deletes its payload: it stopped before BullMQ
      // marked the job done, and the job came back. Nothing is left to store.
      log.warn({ jobId: job.id, payload: parsed.data.payload }, 'payload gone: batch was stored')
      return NOTHING
    }
    const { fresh, ...result } = await storeLines(db, lines, observedAt, source, {
      recent,
      batchId: job.id,
    })
    const seconds = (performance.now() - started) / 1000
    await publisher.publishFresh(fresh)
    try {
      await dropPostsPayload(redis, parsed.data)
    } catch (err) {
      // Committed all the same: a payload left behind costs memory (the sweep takes it), never a Post.
      log.warn({ err, payload: parsed.data.payload }, 'could not delete a stored payload')
    }
    metrics?.batchStored({ ...result, lines: lines.length, seconds })
    log.debug(
      { jobId: job.id, lines: lines.length, ...result, ms: Math.round(seconds * 1000) },
      'batch stored',
    )
    return { ...result, lines: lines.length }
  }
}
