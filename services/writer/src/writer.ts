import { isDataError, relayOutbox, storeBatch, type Db, type StoreResult } from '@threadline/db'
import { normalizeLines } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import {
  closeRedis,
  createActivityQueue,
  createWorker,
  enqueueActivity,
  postsJobSchema,
  publishStored,
  type Job,
  type PostsJob,
  type PostsJobResult,
  type Redis,
  type StoredEntry,
} from '@threadline/queue'
import { once, withDeadline, type Service } from '@threadline/runtime'

export interface WriterOptions {
  concurrency: number
  lockDuration: number
  stalledInterval: number
  maxStalledCount: number
  streamRetentionMs: number
  shutdownTimeoutMs: number
  /** How often the relay looks for outbox rows nobody relayed (a writer that died after commit). */
  relayIntervalMs?: number
}

export interface WriterDeps {
  db: Db
  /** A worker connection (maxRetriesPerRequest: null); the writer closes it. */
  redis: Redis
  prefix: string
  logger: Logger
  options: WriterOptions
}

export interface Writer extends Service {
  /** Relays outbox rows to the `stored` stream now; resolves when the outbox is drained. */
  relay(): Promise<number>
}

const RELAY_BATCH = 50

/**
 * Stores a batch; if Postgres refuses some row as data (a value out of range, say), splits the
 * lines in halves until the offending lines are alone, and keeps each of those in ingest_rejects
 * with Postgres's reason. The rest of the batch is stored. Transient errors propagate, so BullMQ
 * retries the whole job with backoff.
 */
export async function storeLines(
  db: Db,
  lines: readonly string[],
  observedAt: string,
  source: string,
): Promise<StoreResult> {
  const batch = normalizeLines(lines, observedAt)
  try {
    return await storeBatch(db, batch, source)
  } catch (err) {
    if (!isDataError(err)) throw err
    if (lines.length === 1) {
      const reason = `refused by Postgres: ${(err as Error).message}`
      const raw = lines[0]!.replaceAll('\u0000', '\\u0000')
      return storeBatch(db, { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }, source)
    }
    const mid = Math.ceil(lines.length / 2)
    const a = await storeLines(db, lines.slice(0, mid), observedAt, source)
    const b = await storeLines(db, lines.slice(mid), observedAt, source)
    return {
      inserted: a.inserted + b.inserted,
      updated: a.updated + b.updated,
      users: a.users + b.users,
      rejects: a.rejects + b.rejects,
    }
  }
}

export function createWriter(deps: WriterDeps): Writer {
  const { db, redis, prefix, options } = deps
  const log = deps.logger.child({ component: 'writer' })
  // Relayed outbox batches also become `activity` jobs (events for subscriptions, issue 7).
  const activity = createActivityQueue(redis, prefix, deps.logger)

  let relaying: Promise<number> | undefined
  let relayAgain = false
  const relayOnce = async (): Promise<number> => {
    let total = 0
    for (;;) {
      const n = await relayOutbox(db, RELAY_BATCH, async (batch) => {
        const entries: StoredEntry[] = batch.posts.map((p) => ({
          type: 'post',
          id: p.id,
          body: JSON.stringify({ data: p.post, author: p.author ?? undefined }),
        }))
        for (const payload of batch.payloads) {
          for (const change of payload.user_changes) {
            entries.push({ type: 'user_change', id: change.id, body: JSON.stringify(change) })
          }
        }
        await publishStored(redis, prefix, entries, options.streamRetentionMs)
        await enqueueActivity(activity, batch.payloads)
      })
      total += n
      if (n < RELAY_BATCH) return total
    }
  }
  /** One relay at a time per process; a request during a run schedules one more run. */
  const relay = (): Promise<number> => {
    if (relaying) {
      relayAgain = true
      return relaying
    }
    relaying = (async () => {
      let total = 0
      do {
        relayAgain = false
        total += await relayOnce()
      } while (relayAgain)
      return total
    })().finally(() => {
      relaying = undefined
    })
    return relaying
  }
  const relaySafely = () =>
    relay().catch((err: unknown) => {
      log.warn({ err }, 'relay failed; the outbox keeps the rows for the next pass')
      return 0
    })

  const processor = async (job: Job<PostsJob, PostsJobResult>): Promise<PostsJobResult> => {
    const parsed = postsJobSchema.safeParse(job.data)
    if (!parsed.success) {
      // A payload we cannot read is kept where operators look, not retried forever.
      const raw = JSON.stringify(job.data ?? null).replaceAll('\\u0000', '\\\\u0000')
      const reason = `invalid posts job ${job.id}: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`
      await storeBatch(db, { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }, 'queue')
      log.warn({ jobId: job.id }, reason)
      return { inserted: 0, updated: 0, users: 0, rejects: 1, lines: 0 }
    }
    const { lines, observed_at: observedAt, source } = parsed.data
    const started = performance.now()
    const result = await storeLines(db, lines, observedAt, source)
    log.debug(
      {
        jobId: job.id,
        lines: lines.length,
        ...result,
        ms: Math.round(performance.now() - started),
      },
      'batch stored',
    )
    void relaySafely()
    return { ...result, lines: lines.length }
  }

  const worker = createWorker<PostsJob, PostsJobResult>(
    'posts',
    processor,
    { connection: redis, prefix, logger: deps.logger },
    options,
  )
  worker.on('failed', (job, err) =>
    log.warn({ err, jobId: job?.id, attempts: job?.attemptsMade }, 'batch failed; will retry'),
  )

  let timer: NodeJS.Timeout | undefined
  const tick = () => {
    timer = setTimeout(() => {
      void relaySafely().finally(() => {
        if (timer) tick()
      })
    }, options.relayIntervalMs ?? 1_000)
  }

  return {
    relay,
    async start() {
      void worker.run().catch((err: unknown) => log.error({ err }, 'worker stopped'))
      await worker.waitUntilReady()
      tick()
      log.info({ concurrency: options.concurrency }, 'writer started')
    },
    close: once(async () => {
      clearTimeout(timer)
      timer = undefined
      try {
        // Finish the jobs in hand; past the deadline, let go of them (their locks lapse and another
        // worker takes them as stalled: nothing is lost, only repeated).
        await withDeadline(options.shutdownTimeoutMs, 'worker.close', () => worker.close())
      } catch (err) {
        log.warn({ err }, 'closing the worker timed out; forcing')
        await worker.close(true)
      }
      await relaySafely()
      await activity.close()
      await closeRedis(redis)
      await db.destroy()
      log.info('writer closed')
    }),
  }
}
