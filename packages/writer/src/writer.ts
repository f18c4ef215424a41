import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import {
  createActivityQueue,
  createPayloadSweeper,
  createQueue,
  createWorker,
  type ComplianceJob,
  type ComplianceJobResult,
  type PostsJob,
  type PostsJobResult,
} from '@threadline/queue'
import { closeRedis, trimStored, type Redis } from '@threadline/redis'
import { once, repeatEvery, withDeadline, type Repeating, type Service } from '@threadline/runtime'
import { applyComplianceJob } from './jobs/apply-compliance.js'
import { storePostsJob } from './jobs/store-posts.js'
import { createPublisher, type Publisher } from './publish.js'
import { RecentlyStored } from './recent.js'

/** The writer's plain settings (writerOptionsFromConfig; tests shorten timings). */
export interface WriterOptions {
  /** The Redis key prefix of the queues and the `stored` stream. */
  prefix: string
  concurrency: number
  lockDuration: number
  stalledInterval: number
  maxStalledCount: number
  streamRetentionMs: number
  shutdownTimeoutMs: number
  /** How often the relay looks for outbox rows nobody relayed (a writer that died after commit). */
  relayIntervalMs?: number
  /** How often to look for `posts` payloads no job will read (see createPayloadSweeper); off if unset. */
  payloadSweepMs?: number
  /** How long such a payload must have been idle before it is deleted (default 60 s). */
  payloadMinIdleSeconds?: number
}

/** Clients already built; the writer closes `db` and `redis` when it closes. */
export interface WriterDeps {
  db: Db
  /** A worker connection (maxRetriesPerRequest: null). */
  redis: Redis
  logger: Logger
  /** Counts and times batches when given (the process's registry). */
  metrics?: WriterMetrics
}

export interface Writer extends Service {
  /** Relays every outbox row to the `stored` stream now; resolves when the outbox is drained. */
  relay(): Promise<number>
}

/** Outbox rows younger than this are being published by their own writer (the fast path). */
const RELAY_MIN_AGE_MS = 5_000
/** How often the stored stream is trimmed to its retention when nothing is appended. */
const STORED_TRIM_MS = 10_000

/**
 * The periodic passes a started writer runs: the relay's and, when configured, the sweep of
 * `posts` payloads left behind by adds that never came (a process that died between payload and job).
 */
function startPasses(
  deps: WriterDeps,
  options: WriterOptions,
  publisher: Publisher,
  postsQueue: ReturnType<typeof createQueue<PostsJob>> | undefined,
  log: Logger,
): Repeating[] {
  const relayPass = repeatEvery(
    options.relayIntervalMs ?? 1_000,
    () => publisher.relaySafely(RELAY_MIN_AGE_MS).then((rows) => deps.metrics?.relayed(rows)),
    (err) => log.warn({ err }, 'relay pass failed'),
  )
  const trimPass = repeatEvery(
    Math.min(options.streamRetentionMs, STORED_TRIM_MS),
    () => trimStored(deps.redis, options.prefix, options.streamRetentionMs),
    (err) => log.warn({ err }, 'trimming the stored stream failed; next pass will retry'),
  )
  if (!options.payloadSweepMs || !postsQueue) return [relayPass, trimPass]
  const sweeper = createPayloadSweeper(
    postsQueue,
    deps.redis,
    options.prefix,
    options.payloadMinIdleSeconds ?? 60,
  )
  const sweepPass = repeatEvery(
    options.payloadSweepMs,
    async () => {
      const n = await sweeper.sweep()
      if (n > 0) log.info({ payloads: n }, 'deleted payloads no job will read')
    },
    (err) => log.warn({ err }, 'payload sweep failed; next pass will retry'),
  )
  return [relayPass, trimPass, sweepPass]
}

/** The writer role: the `posts` worker (jobs/store-posts.ts), its publisher and periodic passes. */
export function createWriter(deps: WriterDeps, options: WriterOptions): Writer {
  const { db, redis, metrics } = deps
  const { prefix } = options
  const log = deps.logger.child({ component: 'writer' })
  const activity = createActivityQueue(redis, prefix, deps.logger)
  const publisher = createPublisher(
    { db, redis, activity, logger: log, metrics },
    { prefix, streamRetentionMs: options.streamRetentionMs },
  )
  // Leaves out of a batch the included copies the statement would skip anyway (stored within the
  // refresh interval); kept for `bench pipeline`'s rows/s target (docs/capacity.md §1).
  const recent = new RecentlyStored()
  const worker = createWorker<PostsJob, PostsJobResult>(
    'posts',
    storePostsJob({ db, redis, logger: log, metrics, publisher, recent }),
    { connection: redis, prefix, logger: deps.logger },
    options,
  )
  worker.on('failed', (job, err) => {
    metrics?.batchFailed()
    log.warn({ err, jobId: job?.id, attempts: job?.attemptsMade }, 'batch failed; will retry')
  })
  // Withdrawals on a worker of their own: a backlog of Posts never holds one back.
  const complianceWorker = createWorker<ComplianceJob, ComplianceJobResult>(
    'compliance',
    applyComplianceJob({
      db,
      redis,
      logger: log,
      metrics,
      prefix,
      streamRetentionMs: options.streamRetentionMs,
    }),
    { connection: redis, prefix, logger: deps.logger },
    { ...options, concurrency: Math.min(2, options.concurrency) },
  )
  complianceWorker.on('failed', (job, err) => {
    log.warn(
      { err, jobId: job?.id, attempts: job?.attemptsMade },
      'compliance job failed; will retry',
    )
  })
  const postsQueue = options.payloadSweepMs
    ? createQueue<PostsJob>('posts', { connection: redis, prefix, logger: deps.logger })
    : undefined
  let running: Repeating[] = []

  return {
    relay: () => publisher.relay(),
    async start() {
      void worker.run().catch((err: unknown) => log.error({ err }, 'worker stopped'))
      void complianceWorker
        .run()
        .catch((err: unknown) => log.error({ err }, 'compliance worker stopped'))
      await worker.waitUntilReady()
      await complianceWorker.waitUntilReady()
      running = startPasses(deps, options, publisher, postsQueue, log)
      log.info({ concurrency: options.concurrency }, 'writer started')
    },
    close: once(async () => {
      for (const pass of running) pass.stop()
      try {
        // Finish the jobs in hand; past the deadline, let go of them (their locks lapse and another
        // worker takes them as stalled: nothing is lost, only repeated).
        await withDeadline(options.shutdownTimeoutMs, 'worker.close', () =>
          Promise.all([worker.close(), complianceWorker.close()]),
        )
      } catch (err) {
        log.warn({ err }, 'closing the workers timed out; forcing')
        await Promise.all([worker.close(true), complianceWorker.close(true)])
      }
      await publisher.relaySafely()
      await activity.close()
      await postsQueue?.close()
      await closeRedis(redis)
      await db.destroy()
      log.info('writer closed')
    }),
  }
}
