import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { createQueue, type PostsJob } from '@threadline/queue'
import { closeRedis, createLease, type Lease, type Redis } from '@threadline/redis'
import { once, type Service } from '@threadline/runtime'
import type { BatcherCounts } from './batcher.js'
import { createBackfillQueue, createBackfillWorker, type BackfillWorkerDeps } from './backfill.js'
import { createComplianceQueue } from './compliance/queue.js'
import { PostsProducer } from './jobs/queue-batch.js'
import { LeaderLoop } from './leader-loop.js'
import { RedisRoom } from './redis-room.js'
import type { IngestOptions } from './options.js'
import { MarkStore } from './stream-mark.js'
import type { StreamEvent } from './stream-reader.js'
import { UpstreamClient } from './upstream.js'

export interface IngestDeps {
  db: Db
  /** For the LISTEN client of rule sync. */
  databaseUrl: string
  /** A producer connection (fails fast: a stalled queue stops the stream): the ingest closes it. */
  redis: Redis
  /** A worker connection for the backfill worker: the ingest closes it. */
  workerRedis: Redis
  prefix: string
  logger: Logger
  /** Counts stream events, lines, backfill pages, queued batches and recovered windows. */
  metrics?: IngestMetrics
}

export interface IngestStats {
  leader: boolean
  connects: number
  lines: number
  keepAlives: number
  errorLines: number
  batches: number
  /** The stream's batches by why they were queued (see Batcher), in this leadership. */
  streamBatches: BatcherCounts
  ruleSyncs: number
  activeRules: number
  /** Adding jobs is paused because Redis is nearly full (RedisRoom). */
  redisPaused: boolean
}

export interface Ingest extends Service {
  stats(): IngestStats
  /** Stream events (connected, disconnected, error lines) of whichever reader this process runs. */
  onStreamEvent(fn: (e: StreamEvent) => void): () => void
  /** Runs a rule sync now, when this process leads. */
  syncRules(): Promise<void>
  readonly lease: Lease
}

const DEFAULT_QUERY_MAX_LENGTH = 512

/**
 * The ingest: rule sync, the stream reader and the planning of window recovery run only in the
 * replica holding the leader lease (one upstream connection however many replicas); the backfill
 * worker (conversation backfills, window searches) runs everywhere.
 */
export function createIngest(deps: IngestDeps, options: IngestOptions): Ingest {
  const { db, redis, prefix, metrics } = deps
  const log = deps.logger.child({ component: 'ingest' })
  const upstream = new UpstreamClient({
    baseUrl: options.upstreamUrl,
    bearerToken: options.upstreamBearerToken,
  })
  const postsQueue = createQueue<PostsJob>('posts', {
    connection: redis,
    prefix,
    logger: deps.logger,
  })
  const closing = new AbortController()
  const room = new RedisRoom(redis, log, options.redisRoom)
  const producer = new PostsProducer({
    queue: postsQueue,
    redis,
    prefix,
    metrics,
    room,
    signal: closing.signal,
  })
  const compliance = createComplianceQueue(
    { ...deps, upstream, posts: producer, room, signal: closing.signal },
    options,
  )
  const backfillQueue = createBackfillQueue({ db, redis, prefix, logger: deps.logger })
  const backfillWorker =
    options.backfillWorker === false
      ? undefined
      : createBackfillWorker(backfillWorkerDeps(deps, options, upstream, producer))
  const lease = createLease(redis, `${prefix}:ingest:leader`, {
    ttlMs: options.leaseMs,
    logger: deps.logger,
  })
  metrics?.leader(() => lease.held)
  metrics?.redisPaused(() => room.paused)
  const leader = new LeaderLoop(
    {
      ...deps,
      upstream,
      options,
      lease,
      postsQueue,
      producer,
      compliance,
      backfillQueue,
      marks: new MarkStore(redis, prefix),
    },
    closing.signal,
    log,
  )
  if (metrics) leader.onStreamEvent((e) => metrics.streamEvent(e))

  return {
    lease,
    stats() {
      const s = leader.readerStats()
      return {
        leader: lease.held,
        connects: s.connects,
        lines: s.lines,
        keepAlives: s.keepAlives,
        errorLines: s.errorLines,
        batches: producer.batches,
        streamBatches: leader.streamBatches(),
        ruleSyncs: leader.ruleSync?.syncs ?? 0,
        activeRules: leader.ruleSync?.lastResult?.active ?? 0,
        redisPaused: room.paused,
      }
    },
    onStreamEvent: (fn) => leader.onStreamEvent(fn),
    async syncRules() {
      await leader.ruleSync?.request()
    },
    async start() {
      await backfillWorker?.start()
      if (options.leader !== false) leader.start()
      log.info({ upstream: options.upstreamUrl }, 'ingest started')
    },
    close: once(async () => {
      closing.abort()
      await leader.stopped()
      await backfillWorker?.close()
      await backfillQueue.close()
      await compliance?.queue.close()
      await postsQueue.close()
      await lease.release()
      await closeRedis(redis)
      await closeRedis(deps.workerRedis)
      await db.destroy()
      log.info('ingest closed')
    }),
  }
}

/** The backfill worker's deps: conversation backfills and window recoveries, pages as `posts` jobs. */
function backfillWorkerDeps(
  deps: IngestDeps,
  options: IngestOptions,
  upstream: UpstreamClient,
  producer: PostsProducer,
): BackfillWorkerDeps {
  const { metrics } = deps
  return {
    db: deps.db,
    upstream,
    redis: deps.workerRedis,
    prefix: deps.prefix,
    logger: deps.logger,
    metrics,
    queryMaxLength: options.queryMaxLength ?? DEFAULT_QUERY_MAX_LENGTH,
    sink: (line, source, pageId) => {
      metrics?.backfillPage()
      const batch = { id: pageId, firstAttempt: false }
      return producer.add([line], new Date().toISOString(), source, batch)
    },
    options: {
      search: options.search,
      concurrency: options.backfillConcurrency,
      rateLimitBackoffMs: options.backoff.rateLimitMs,
      maxWaitMs: options.backfillMaxWaitMs,
      lockDuration: options.backfillLockDuration,
      stalledInterval: options.backfillStalledInterval,
    },
  }
}
