import type { IngestMetrics } from '@threadline/metrics'
import { addPostsBatch, type createQueue, type PostsJob } from '@threadline/queue'
import type { Redis } from '@threadline/redis'
import type { BatchId } from '../batcher.js'
import type { RedisRoom } from '../redis-room.js'

export interface PostsProducerDeps {
  queue: ReturnType<typeof createQueue<PostsJob>>
  redis: Redis
  prefix: string
  metrics?: IngestMetrics
  /** Holds each add while Redis is nearly full, until `signal` aborts (the ingest closing). */
  room?: RedisRoom
  signal?: AbortSignal
}

/** Adds `posts` jobs: the stream's batches and backfill pages, each under its own id. */
export class PostsProducer {
  batches = 0

  constructor(private readonly deps: PostsProducerDeps) {}

  /** Adds a `posts` job for the lines under `batch.id` (see addPostsBatch for retries). */
  async add(
    lines: (string | Buffer)[],
    observedAt: string,
    source: string,
    batch: BatchId,
  ): Promise<void> {
    const { queue, redis, prefix, metrics, room, signal } = this.deps
    if (room) await room.wait(signal ?? new AbortController().signal)
    await addPostsBatch(queue, redis, prefix, {
      id: batch.id,
      firstAttempt: batch.firstAttempt,
      source,
      observed_at: observedAt,
      lines,
    })
    this.batches += 1
    metrics?.batchQueued(source, lines.length)
  }
}
