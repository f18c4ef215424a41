import {
  deleteOutbox,
  isDataError,
  relayOutbox,
  storeBatch,
  type Db,
  type OutboxPayload,
  type StoreResult,
} from '@threadline/db'
import { normalizeLines, type NormalizedBatch } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import {
  createActivityQueue,
  createPayloadSweeper,
  createQueue,
  createWorker,
  dropPostsPayload,
  enqueueActivity,
  loadPostsLines,
  postsJobSchema,
  type Job,
  type PostsJob,
  type PostsJobResult,
} from '@threadline/queue'
import { closeRedis, publishStored, type Redis, type StoredEntry } from '@threadline/redis'
import { once, repeatEvery, withDeadline, type Repeating, type Service } from '@threadline/runtime'
import { coalesced } from './coalesce.js'
import { RecentlyStored, type SentRows } from './recent.js'

export interface WriterOptions {
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

export interface WriterDeps {
  db: Db
  /** A worker connection (maxRetriesPerRequest: null); the writer closes it. */
  redis: Redis
  prefix: string
  logger: Logger
  options: WriterOptions
  /** Counts and times batches when given (the process's registry). */
  metrics?: WriterMetrics
}

export interface Writer extends Service {
  /** Relays every outbox row to the `stored` stream now; resolves when the outbox is drained. */
  relay(): Promise<number>
}

const RELAY_BATCH = 50
/** Outbox rows younger than this are being published by their own writer (the fast path). */
const RELAY_MIN_AGE_MS = 5_000

/** An outbox row a call wrote, with its stream entries, ready to publish after commit. */
export interface FreshOutbox {
  id: string
  payload: OutboxPayload
  entries: StoredEntry[]
}

export interface StoredLines extends Omit<StoreResult, 'outbox'> {
  fresh: FreshOutbox[]
}

/** A Post's `stored` entry: the Post with its author, as the stream hub reads it. */
function postEntry(id: string, post: unknown, author: unknown): StoredEntry {
  const body = author ? { data: post, author } : { data: post }
  return { type: 'post', id, body: JSON.stringify(body) }
}

/** Stream entries for the user changes of outbox rows. */
function userChangeEntries(payloads: readonly OutboxPayload[]): StoredEntry[] {
  return payloads.flatMap((payload) =>
    payload.user_changes.map((change): StoredEntry => ({
      type: 'user_change',
      id: change.id,
      body: JSON.stringify(change),
    })),
  )
}

/** Each Post's `stored` entry, by id, with its author from the same batch. */
function postEntries(batch: NormalizedBatch): Map<string, StoredEntry> {
  const users = new Map(batch.users.map((u) => [u.id, u.raw]))
  const entries = new Map<string, StoredEntry>()
  for (const p of batch.posts) {
    entries.set(p.id, postEntry(p.id, p.raw, p.author_id ? users.get(p.author_id) : undefined))
  }
  return entries
}

/**
 * Normalizes lines and sends them to Postgres, less the copies `recent` says the statement would
 * skip. Of the batch, only text and small records are kept while the statement runs (its
 * parameters, each Post's stream entry, what `recent` remembers after commit): a batch waits on
 * Postgres for most of its life, and its parsed objects held across that wait would be copied by
 * every young-generation GC.
 */
function startStore(
  db: Db,
  lines: readonly string[],
  observedAt: string,
  source: string,
  recent: RecentlyStored | undefined,
) {
  const observedMs = Date.parse(observedAt)
  const skipIncluded = recent && ((id: string) => recent.storedPost(id, observedMs))
  const normalized = normalizeLines(lines, observedAt, { skipIncluded })
  const batch = recent ? recent.skipKnown(normalized) : normalized
  const sent: SentRows = {
    posts: batch.posts.map((p) => ({ id: p.id, observed_at: p.observed_at })),
    users: batch.users.map(({ id, observed_at, name, username }) => ({
      id,
      observed_at,
      name,
      username,
    })),
  }
  // Entries from the whole batch: a Post's author travels with it even when its row is not resent.
  return { entries: postEntries(normalized), sent, stored: storeBatch(db, batch, source) }
}

/**
 * Normalizes a batch's lines and stores them in one transaction. If Postgres refuses some row as
 * data (a value out of range, say), splits the lines in halves until the offending lines are
 * alone, and keeps each of those in ingest_rejects with Postgres's reason; the rest is stored.
 * Transient errors propagate, so BullMQ retries the whole job with backoff. Returns what was newly
 * stored, for publishing after commit.
 */
export async function storeLines(
  db: Db,
  lines: readonly string[],
  observedAt: string,
  source: string,
  recent?: RecentlyStored,
): Promise<StoredLines> {
  const { entries, sent, stored } = startStore(db, lines, observedAt, source, recent)
  try {
    const { outbox, ...result } = await stored
    recent?.remember(sent)
    const fresh = outbox.map(({ id, payload }) => ({
      id,
      payload,
      entries: [
        ...payload.post_ids.flatMap((postId) => entries.get(postId) ?? []),
        ...userChangeEntries([payload]),
      ],
    }))
    return { ...result, fresh }
  } catch (err) {
    if (!isDataError(err)) throw err
    if (lines.length === 1) {
      const reason = `refused by Postgres: ${(err as Error).message}`
      const raw = lines[0]!.replaceAll('\u0000', '\\u0000')
      const rejected = { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }
      const { outbox: _none, ...result } = await storeBatch(db, rejected, source)
      return { ...result, fresh: [] }
    }
    const mid = Math.ceil(lines.length / 2)
    const a = await storeLines(db, lines.slice(0, mid), observedAt, source, recent)
    const b = await storeLines(db, lines.slice(mid), observedAt, source, recent)
    return {
      inserted: a.inserted + b.inserted,
      updated: a.updated + b.updated,
      users: a.users + b.users,
      rejects: a.rejects + b.rejects,
      fresh: [...a.fresh, ...b.fresh],
    }
  }
}

export function createWriter(deps: WriterDeps): Writer {
  const { db, redis, prefix, options, metrics } = deps
  const log = deps.logger.child({ component: 'writer' })
  const recent = new RecentlyStored()
  // Relayed outbox batches also become `activity` jobs (events for subscriptions).
  const activity = createActivityQueue(redis, prefix, deps.logger)

  const publish = async (entries: StoredEntry[], payloads: OutboxPayload[]) => {
    await publishStored(redis, prefix, entries, options.streamRetentionMs)
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
  /**
   * The fast path: right after commit, publish what a job newly stored and drop its outbox rows.
   * If this fails (or the process dies first), the rows stay for the relay.
   */
  const publishFresh = async (fresh: FreshOutbox[]) => {
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
  }
  /**
   * One relay at a time per process (see coalesced). The periodic pass leaves rows younger than
   * RELAY_MIN_AGE_MS to the writer that is publishing them.
   */
  const relay = coalesced(relayOnce)
  const relaySafely = (minAgeMs = 0) =>
    relay(minAgeMs).catch((err: unknown) => {
      log.warn({ err }, 'relay failed; the outbox keeps the rows for the next pass')
      return 0
    })

  /** A job we cannot read is kept where operators look, not retried forever. */
  const rejectJob = async (job: Job<PostsJob, PostsJobResult>, issues: string) => {
    const raw = JSON.stringify(job.data ?? null).replaceAll('\\u0000', '\\\\u0000')
    const reason = `invalid posts job ${job.id}: ${issues}`
    await storeBatch(db, { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }, 'queue')
    log.warn({ jobId: job.id }, reason)
    metrics?.batchInvalid()
    return { inserted: 0, updated: 0, users: 0, rejects: 1, lines: 0 }
  }

  // parse → normalize and store (one transaction) → publish.
  const processor = async (job: Job<PostsJob, PostsJobResult>): Promise<PostsJobResult> => {
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
      return { inserted: 0, updated: 0, users: 0, rejects: 0, lines: 0 }
    }
    const { fresh, ...result } = await storeLines(db, lines, observedAt, source, recent)
    const seconds = (performance.now() - started) / 1000
    await publishFresh(fresh)
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

  const worker = createWorker<PostsJob, PostsJobResult>(
    'posts',
    processor,
    { connection: redis, prefix, logger: deps.logger },
    options,
  )
  worker.on('failed', (job, err) => {
    metrics?.batchFailed()
    log.warn({ err, jobId: job?.id, attempts: job?.attemptsMade }, 'batch failed; will retry')
  })

  // Payloads left behind by adds that never came (a process that died between payload and job).
  const sweepMs = options.payloadSweepMs
  const postsQueue = sweepMs
    ? createQueue<PostsJob>('posts', { connection: redis, prefix, logger: deps.logger })
    : undefined
  /** The periodic passes start() begins: the relay's and, when configured, the payload sweep's. */
  const passes = (): Repeating[] => {
    const relayPass = repeatEvery(
      options.relayIntervalMs ?? 1_000,
      () => relaySafely(RELAY_MIN_AGE_MS).then((rows) => metrics?.relayed(rows)),
      (err) => log.warn({ err }, 'relay pass failed'),
    )
    if (!sweepMs || !postsQueue) return [relayPass]
    const sweeper = createPayloadSweeper(
      postsQueue,
      redis,
      prefix,
      options.payloadMinIdleSeconds ?? 60,
    )
    const sweepPass = repeatEvery(
      sweepMs,
      async () => {
        const n = await sweeper.sweep()
        if (n > 0) log.info({ payloads: n }, 'deleted payloads no job will read')
      },
      (err) => log.warn({ err }, 'payload sweep failed; next pass will retry'),
    )
    return [relayPass, sweepPass]
  }
  let running: Repeating[] = []

  return {
    relay: () => relay(),
    async start() {
      void worker.run().catch((err: unknown) => log.error({ err }, 'worker stopped'))
      await worker.waitUntilReady()
      running = passes()
      log.info({ concurrency: options.concurrency }, 'writer started')
    },
    close: once(async () => {
      for (const pass of running) pass.stop()
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
      await postsQueue?.close()
      await closeRedis(redis)
      await db.destroy()
      log.info('writer closed')
    }),
  }
}
