import { randomUUID } from 'node:crypto'
import type { ComplianceEvent } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import {
  addComplianceBatch,
  complianceJobId,
  COMPLIANCE_BATCH_MAX_EVENTS,
  type ComplianceJob,
  type createQueue,
} from '@threadline/queue'
import type { UpstreamClient } from '../upstream.js'
import type { PostsProducer } from './queue-batch.js'
import type { RedisRoom } from '../redis-room.js'

/** Lookup takes at most 100 ids a request. */
const LOOKUP_MAX_IDS = 100

export interface ComplianceProducerDeps {
  queue: ReturnType<typeof createQueue<ComplianceJob>>
  /** Edited Posts, fetched again, go to the writer as `posts` batches. */
  posts: PostsProducer
  upstream: UpstreamClient
  logger: Logger
  metrics?: IngestMetrics
  /** Holds each add while Redis is nearly full, until `signal` aborts (the ingest closing). */
  room?: RedisRoom
  signal?: AbortSignal
}

/**
 * Adds `compliance` jobs (the writer applies them, jobs/apply-compliance.ts in the writer) and
 * fetches again the Posts a `tweet_edit` names, so their new version is stored like any Post.
 */
export class ComplianceProducer {
  constructor(private readonly deps: ComplianceProducerDeps) {}

  /** The ids of the jobs `add(events, batchId)` adds (to watch them before they are added). */
  static jobIds(count: number, batchId: string): string[] {
    const ids: string[] = []
    for (let i = 0; i * COMPLIANCE_BATCH_MAX_EVENTS < count; i++)
      ids.push(complianceJobId(batchId, i))
    return ids
  }

  /**
   * Queues `events` in jobs of at most COMPLIANCE_BATCH_MAX_EVENTS. `batchId` names the jobs, the
   * same on a retry of the same events (BullMQ ignores a job id it holds).
   */
  async add(events: readonly ComplianceEvent[], batchId: string = randomUUID()): Promise<void> {
    for (let i = 0; i * COMPLIANCE_BATCH_MAX_EVENTS < events.length; i++) {
      const chunk = events.slice(
        i * COMPLIANCE_BATCH_MAX_EVENTS,
        (i + 1) * COMPLIANCE_BATCH_MAX_EVENTS,
      )
      const { room, signal } = this.deps
      if (room) await room.wait(signal ?? new AbortController().signal)
      await addComplianceBatch(this.deps.queue, chunk, complianceJobId(batchId, i))
      this.deps.metrics?.complianceQueued(chunk[0]!.source, chunk.length)
    }
    await this.refetchEdits(events)
  }

  /** The new versions of edited Posts, through lookup, as `posts` batches. */
  private async refetchEdits(events: readonly ComplianceEvent[]): Promise<void> {
    const edited = [...new Set(events.filter((e) => e.action === 'tweet_edit').map((e) => e.id))]
    for (let i = 0; i < edited.length; i += LOOKUP_MAX_IDS) {
      const ids = edited.slice(i, i + LOOKUP_MAX_IDS)
      try {
        const page = await this.deps.upstream.lookup(ids)
        const batch = { id: randomUUID(), firstAttempt: true }
        await this.deps.posts.add([page.body], new Date().toISOString(), 'compliance', batch)
      } catch (err) {
        // The edit is logged all the same; the next copy of the Post (stream, backfill) brings it.
        this.deps.logger.warn({ err, ids }, 'could not fetch edited Posts again')
      }
    }
  }
}
