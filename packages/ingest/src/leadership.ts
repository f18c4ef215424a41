import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { watchJobs, type createQueue, type PostsJob } from '@threadline/queue'
import type { Lease, Redis } from '@threadline/redis'
import type { BackfillQueue } from './backfill.js'
import { Batcher, type BatcherCounts } from './batcher.js'
import type { ComplianceQueue } from './compliance/queue.js'
import { startCompliance } from './compliance/run.js'
import type { IngestOptions } from './options.js'
import type { PostsProducer } from './jobs/queue-batch.js'
import { WindowRecovery } from './recovery.js'
import { RuleSync } from './jobs/sync-rules.js'
import type { MarkStore } from './stream-mark.js'
import { StreamReader, type StreamEvent } from './stream-reader.js'
import type { UpstreamClient } from './upstream.js'

export interface LeadershipDeps {
  db: Db
  databaseUrl: string
  upstream: UpstreamClient
  workerRedis: Redis
  prefix: string
  logger: Logger
  metrics?: IngestMetrics
  options: IngestOptions
  lease: Lease
  postsQueue: ReturnType<typeof createQueue<PostsJob>>
  producer: PostsProducer
  /** Set when UPSTREAM_COMPLIANCE is not `off`. */
  compliance?: ComplianceQueue
  redis: Redis
  backfillQueue: BackfillQueue
  marks: MarkStore
  streamListeners: ReadonlySet<(e: StreamEvent) => void>
}

/** What a leadership shows of itself while it runs, for the ingest's stats. */
export interface Leading {
  reader: StreamReader
  ruleSync: RuleSync
  streamBatches: BatcherCounts
}

/**
 * One leadership: rule sync, the stream, and recovery of the stream's windows, until the lease is
 * lost (then the connection is dropped at once) or `closing` aborts.
 */
export async function runLeadership(
  deps: LeadershipDeps,
  closing: AbortSignal,
  show: (leading: Leading | undefined) => void,
): Promise<void> {
  const { options, metrics } = deps
  const sync = new RuleSync({
    db: deps.db,
    databaseUrl: deps.databaseUrl,
    upstream: deps.upstream,
    logger: deps.logger,
    options: { reconcileMs: options.reconcileMs, debounceMs: options.rulesDebounceMs },
    backfill: (ids) => deps.backfillQueue.enqueue(ids),
  })
  const recovery = new WindowRecovery({
    marks: deps.marks,
    enqueue: (id, job) => deps.backfillQueue.recover(id, job),
    logger: deps.logger,
    metrics,
    options: { backfillMinutes: options.backfillMinutes, search: options.search },
  })
  // A batch is in flight until a writer has stored it: while one is, the stream's lines gather
  // into the next (group commit, docs/architecture.md).
  const stored = await watchJobs(deps.postsQueue, 'posts', deps.prefix, deps.workerRedis)
  const batcher = new Batcher<Buffer>(
    async (lines, observedAt, batch) => {
      // Asked before the add, so that a quick writer's event is not missed.
      const done = stored.done(batch.id)
      await deps.producer.add(lines, observedAt, 'stream', batch)
      await recovery.queued(lines, observedAt)
      return { done }
    },
    { maxItems: options.batchMaxItems, maxBytes: options.batchMaxBytes },
    deps.logger,
  )
  const reader = new StreamReader({
    upstream: deps.upstream,
    sink: (line) => {
      metrics?.streamLine()
      return batcher.add(line)
    },
    logger: deps.logger,
    waitForRules: (signal) => sync.waitForRules(signal),
    recovery,
    options: {
      policy: options.backoff,
      stallMs: options.stallMs,
      backfillMinutes: options.backfillMinutes,
      noRulesRetryMs: options.noRulesRetryMs,
    },
  })
  for (const fn of deps.streamListeners) reader.onEvent(fn)
  show({ reader, ruleSync: sync, streamBatches: batcher.counts })
  let offLost = () => {}
  let compliance: { close(): Promise<void> } | undefined
  const stopped = new Promise<void>((resolve) => {
    const off = deps.lease.onLost(resolve)
    offLost = () => void off()
    closing.addEventListener('abort', () => resolve(), { once: true })
    // Lost while this leadership was being set up: nothing to run.
    if (!deps.lease.held) resolve()
  })
  try {
    // The rules first: the stream answers 409 until the upstream holds one.
    await sync.start()
    reader.start()
    if (deps.compliance) compliance = await startCompliance({ ...deps, ...deps.compliance })
    await stopped
  } finally {
    offLost()
    await compliance?.close()
    // A reader held by the batcher (queue unreachable) is released by the batcher's deadline.
    const readerClosed = reader.close()
    await batcher.close(options.shutdownTimeoutMs)
    await readerClosed
    await batcher.close(options.shutdownTimeoutMs)
    await stored.close()
    await sync.close()
    show(undefined)
  }
}
