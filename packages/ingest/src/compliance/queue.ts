import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { createQueue, type ComplianceJob } from '@threadline/queue'
import type { Redis } from '@threadline/redis'
import type { PostsProducer } from '../jobs/queue-batch.js'
import { ComplianceProducer } from '../jobs/queue-compliance.js'
import type { IngestOptions } from '../options.js'
import type { RedisRoom } from '../redis-room.js'
import type { UpstreamClient } from '../upstream.js'
import { SweepStore } from './sweep.js'

export interface ComplianceQueueDeps {
  redis: Redis
  prefix: string
  logger: Logger
  metrics?: IngestMetrics
  upstream: UpstreamClient
  /** Edited Posts, fetched again, go to the writer as `posts` batches. */
  posts: PostsProducer
  /** Holds each add while Redis is nearly full, until `signal` aborts (the ingest closing). */
  room: RedisRoom
  signal: AbortSignal
}

/** The `compliance` queue and the producer that adds its jobs. */
export interface ComplianceQueue {
  queue: ReturnType<typeof createQueue<ComplianceJob>>
  producer: ComplianceProducer
}

/** The `compliance` queue and its producer, unless UPSTREAM_COMPLIANCE is `off`. */
export function createComplianceQueue(
  deps: ComplianceQueueDeps,
  options: IngestOptions,
): ComplianceQueue | undefined {
  if (!options.compliance || options.compliance.mode === 'off') return undefined
  const { redis, prefix, metrics } = deps
  const queue = createQueue<ComplianceJob>('compliance', {
    connection: redis,
    prefix,
    logger: deps.logger,
  })
  const producer = new ComplianceProducer({
    queue,
    posts: deps.posts,
    upstream: deps.upstream,
    logger: deps.logger,
    metrics,
    room: deps.room,
    signal: deps.signal,
  })
  // Read from Redis at scrape time, so every replica reports it, leading or not.
  const store = new SweepStore(redis, prefix)
  if (options.compliance.mode === 'jobs') {
    metrics?.complianceSweep(async () => (await store.read()).lastCompleteAt)
  }
  return { queue, producer }
}
