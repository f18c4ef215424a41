import { randomUUID } from 'node:crypto'
import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { addPostsBatch, createQueue, watchJobs, type PostsJob } from '@threadline/queue'
import { closeRedis, createLease, type Lease, type Redis } from '@threadline/redis'
import { once, type Service } from '@threadline/runtime'
import type { BackoffPolicy } from './backoff.js'
import { Batcher, type BatcherCounts } from './batcher.js'
import { createBackfillQueue, createBackfillWorker } from './backfill.js'
import { RuleSync } from './rule-sync.js'
import { StreamReader, type StreamEvent } from './stream-reader.js'
import { UpstreamClient } from './upstream.js'

export interface IngestOptions {
  upstreamUrl: string
  upstreamBearerToken?: string
  search: 'recent' | 'all'
  batchMaxItems: number
  batchMaxBytes?: number
  reconcileMs: number
  rulesDebounceMs: number
  stallMs: number
  backfillMinutes: number
  noRulesRetryMs: number
  backoff: BackoffPolicy
  leaseMs: number
  backfillConcurrency: number
  backfillMaxWaitMs: number
  shutdownTimeoutMs: number
  /** Run the backfill worker in this process (default true). */
  backfillWorker?: boolean
  /** Take part in the leader election for rule sync and the stream (default true). */
  leader?: boolean
  backfillLockDuration?: number
  backfillStalledInterval?: number
}

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
  options: IngestOptions
  /** Counts stream events, lines, backfill pages and queued batches when given. */
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
}

export interface Ingest extends Service {
  stats(): IngestStats
  /** Stream events (connected, disconnected, error lines) of whichever reader this process runs. */
  onStreamEvent(fn: (e: StreamEvent) => void): () => void
  /** Runs a rule sync now, when this process leads. */
  syncRules(): Promise<void>
  readonly lease: Lease
}

/**
 * The ingest: rule sync and the stream reader run only in the replica holding the leader lease
 * (one upstream connection however many replicas), the backfill worker runs everywhere.
 */
export function createIngest(deps: IngestDeps): Ingest {
  const { db, redis, prefix, options, metrics } = deps
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
  const counters = { batches: 0 }
  const backfillQueue = createBackfillQueue({ db, redis, prefix, logger: deps.logger })
  // The Batcher retries a batch with the same array: the same id then names its payload and job.
  const batchIds = new WeakMap<object, string>()
  /** The id of a batch of the stream: made on its first attempt, the same on every retry. */
  const streamBatchId = (lines: object): { id: string; firstAttempt: boolean } => {
    const known = batchIds.get(lines)
    if (known !== undefined) return { id: known, firstAttempt: false }
    const id = randomUUID()
    batchIds.set(lines, id)
    return { id, firstAttempt: true }
  }
  /** Adds a `posts` job for the lines under `id` (see addPostsBatch for retries). */
  const addPosts = async (
    lines: (string | Buffer)[],
    observedAt: string,
    source: string,
    { id, firstAttempt }: { id: string; firstAttempt: boolean },
  ): Promise<void> => {
    await addPostsBatch(postsQueue, redis, prefix, {
      id,
      firstAttempt,
      source,
      observed_at: observedAt,
      lines,
    })
    counters.batches += 1
    metrics?.batchQueued(source, lines.length)
  }
  const backfillWorker =
    options.backfillWorker === false
      ? undefined
      : createBackfillWorker({
          db,
          upstream,
          redis: deps.workerRedis,
          prefix,
          logger: deps.logger,
          sink: (line, source, pageId) => {
            metrics?.backfillPage()
            return addPosts([line], new Date().toISOString(), source, {
              id: pageId,
              firstAttempt: false,
            })
          },
          options: {
            search: options.search,
            concurrency: options.backfillConcurrency,
            rateLimitBackoffMs: options.backoff.rateLimitMs,
            maxWaitMs: options.backfillMaxWaitMs,
            lockDuration: options.backfillLockDuration,
            stalledInterval: options.backfillStalledInterval,
          },
        })
  const lease = createLease(redis, `${prefix}:ingest:leader`, {
    ttlMs: options.leaseMs,
    logger: deps.logger,
  })
  metrics?.leader(() => lease.held)

  const streamListeners = new Set<(e: StreamEvent) => void>()
  if (metrics) streamListeners.add((e) => metrics.streamEvent(e))
  let reader: StreamReader | undefined
  let ruleSync: RuleSync | undefined
  let streamBatches: BatcherCounts = { atOnce: 0, gathered: 0, full: 0 }
  let lastReaderStats = { connects: 0, lines: 0, keepAlives: 0, errorLines: 0 }
  const closing = new AbortController()
  let leading: Promise<void> | undefined

  /** Runs rule sync and the stream until the lease is lost or the ingest closes. */
  const lead = async () => {
    const sync = new RuleSync({
      db,
      databaseUrl: deps.databaseUrl,
      upstream,
      logger: deps.logger,
      options: { reconcileMs: options.reconcileMs, debounceMs: options.rulesDebounceMs },
      backfill: (ids) => backfillQueue.enqueue(ids),
    })
    // A batch is in flight until a writer has stored it: while one is, the stream's lines gather
    // into the next (group commit, docs/architecture.md).
    const stored = await watchJobs(postsQueue, 'posts', prefix, deps.workerRedis)
    const batcher = new Batcher<Buffer>(
      async (lines, observedAt) => {
        const batch = streamBatchId(lines)
        // Asked before the add, so that a quick writer's event is not missed.
        const done = stored.done(batch.id)
        await addPosts(lines, observedAt, 'stream', batch)
        return { done }
      },
      { maxItems: options.batchMaxItems, maxBytes: options.batchMaxBytes },
      deps.logger,
    )
    const streamReader = new StreamReader({
      upstream,
      sink: (line) => {
        metrics?.streamLine()
        return batcher.add(line)
      },
      logger: deps.logger,
      waitForRules: (signal) => sync.waitForRules(signal),
      options: {
        policy: options.backoff,
        stallMs: options.stallMs,
        backfillMinutes: options.backfillMinutes,
        noRulesRetryMs: options.noRulesRetryMs,
      },
    })
    for (const fn of streamListeners) streamReader.onEvent(fn)
    ruleSync = sync
    reader = streamReader
    streamBatches = batcher.counts
    const stopped = new Promise<void>((resolve) => {
      const off = lease.onLost(() => {
        off()
        resolve()
      })
      closing.signal.addEventListener('abort', () => resolve(), { once: true })
    })
    try {
      // The rules first: the stream answers 409 until the upstream holds one.
      await sync.start()
      streamReader.start()
      await stopped
    } finally {
      // A reader held by the batcher (queue unreachable) is released by the batcher's deadline.
      const readerClosed = streamReader.close()
      await batcher.close(options.shutdownTimeoutMs)
      await readerClosed
      await batcher.close(options.shutdownTimeoutMs)
      await stored.close()
      await sync.close()
      lastReaderStats = { ...streamReader.stats }
      reader = undefined
      ruleSync = undefined
    }
  }

  const leaderLoop = async () => {
    while (!closing.signal.aborted) {
      if (!(await lease.acquire(closing.signal))) return
      log.info('leading: rule sync and the upstream stream run here')
      try {
        await lead()
      } catch (err) {
        log.error({ err }, 'leader duties failed; stepping down')
      }
      await lease.release()
    }
  }

  return {
    lease,
    stats() {
      const s = reader?.stats ?? lastReaderStats
      return {
        leader: lease.held,
        connects: s.connects,
        lines: s.lines,
        keepAlives: s.keepAlives,
        errorLines: s.errorLines,
        batches: counters.batches,
        streamBatches: { ...streamBatches },
        ruleSyncs: ruleSync?.syncs ?? 0,
        activeRules: ruleSync?.lastResult?.active ?? 0,
      }
    },
    onStreamEvent(fn) {
      streamListeners.add(fn)
      const off = reader?.onEvent(fn)
      return () => {
        streamListeners.delete(fn)
        off?.()
      }
    },
    async syncRules() {
      await ruleSync?.request()
    },
    async start() {
      await backfillWorker?.start()
      if (options.leader !== false) {
        leading = leaderLoop().catch((err: unknown) => log.error({ err }, 'leader loop failed'))
      }
      log.info({ upstream: options.upstreamUrl }, 'ingest started')
    },
    close: once(async () => {
      closing.abort()
      await leading
      await backfillWorker?.close()
      await backfillQueue.close()
      await postsQueue.close()
      await lease.release()
      await closeRedis(redis)
      await closeRedis(deps.workerRedis)
      await db.destroy()
      log.info('ingest closed')
    }),
  }
}
