import { deleteOutbox, relayOutbox, type Db, type OutboxPayload } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import { enqueueActivity, type createActivityQueue } from '@threadline/queue'
import { publishStored, type Redis, type StoredEntry } from '@threadline/redis'
import { coalesced } from './coalesce.js'
import { postEntry, userChangeEntries } from './stored-entries.js'
import type { FreshOutbox } from './store-lines.js'

const RELAY_BATCH = 50

export interface PublisherDeps {
  db: Db
  redis: Redis
  /** The `activity` queue: relayed outbox batches also become events for subscriptions. */
  activity: ReturnType<typeof createActivityQueue>
  logger: Logger
  metrics?: WriterMetrics
}

export interface Publisher {
  /**
   * The fast path: right after commit, publish what a job newly stored and drop its outbox rows.
   * If this fails (or the process dies first), the rows stay for the relay.
   */
  publishFresh(fresh: FreshOutbox[]): Promise<void>
  /**
   * Relays outbox rows older than `minAgeMs` (every row by default) to the `stored` stream and
   * the `activity` queue; resolves with how many once none is left. One relay at a time per
   * process (see coalesced).
   */
  relay(minAgeMs?: number): Promise<number>
  /** relay that logs a failure and resolves with 0: the outbox keeps the rows for the next pass. */
  relaySafely(minAgeMs?: number): Promise<number>
}

/** What the writer publishes after commit: the `stored` stream and `activity` jobs. */
export function createPublisher(
  deps: PublisherDeps,
  options: { prefix: string; streamRetentionMs: number },
): Publisher {
  const { db, redis, activity, metrics } = deps
  const log = deps.logger

  const publish = async (entries: StoredEntry[], payloads: OutboxPayload[]) => {
    await publishStored(redis, options.prefix, entries, options.streamRetentionMs)
    await enqueueActivity(activity, payloads)
  }
  const relayOnce = async (minAgeMs: number): Promise<number> => {
    let total = 0
    for (;;) {
      const n = await relayOutbox(
        db,
        RELAY_BATCH,
        (batch) =>
          publish(
            [
              ...batch.posts.map((p) => postEntry(p.id, p.post, p.author)),
              ...userChangeEntries(batch.payloads),
            ],
            batch.payloads,
          ),
        { minAgeMs },
      )
      total += n
      if (n < RELAY_BATCH) return total
    }
  }
  const relay = coalesced(relayOnce)

  return {
    async publishFresh(fresh) {
      if (fresh.length === 0) return
      try {
        await publish(
          fresh.flatMap((f) => f.entries),
          fresh.map((f) => f.payload),
        )
        await deleteOutbox(
          db,
          fresh.map((f) => f.id),
        )
      } catch (err) {
        metrics?.publishFailed()
        log.warn({ err }, 'publishing after commit failed; the relay will publish from the outbox')
      }
    },
    relay: (minAgeMs = 0) => relay(minAgeMs),
    relaySafely: (minAgeMs = 0) =>
      relay(minAgeMs).catch((err: unknown) => {
        log.warn({ err }, 'relay failed; the outbox keeps the rows for the next pass')
        return 0
      }),
  }
}
