import {
  deleteOutbox,
  isDataError,
  prepareBatch,
  relayOutbox,
  storeBatch,
  storePrepared,
  WireBytes,
  type Db,
  type OutboxPayload,
  type PreparedBatch,
  type StoreResult,
} from '@threadline/db'
import { BatchNormalizer } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import {
  createActivityQueue,
  createPayloadSweeper,
  createQueue,
  createWorker,
  dropPostsPayload,
  enqueueActivity,
  lineText,
  loadPostsLines,
  postsJobSchema,
  type Job,
  type PostsJob,
  type PostsJobResult,
} from '@threadline/queue'
import {
  closeRedis,
  publishStored,
  type Redis,
  type OutgoingEntry,
  type StoredEntry,
} from '@threadline/redis'
import { once, repeatEvery, withDeadline, type Repeating, type Service } from '@threadline/runtime'
import { coalesced } from './coalesce.js'
import { RecentlyStored, type Deferred, type SentRows } from './recent.js'

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

/** What a call newly stored, ready to publish: the stream entries of each outbox row it wrote. */
export interface FreshOutbox {
  id: string
  payload: OutboxPayload
  entries: OutgoingEntry[]
}

export interface StoredLines extends Omit<StoreResult, 'outbox'> {
  fresh: FreshOutbox[]
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

/** Stream entries for stored Posts read back from the outbox (with their author) and user changes. */
function streamEntries(
  posts: Iterable<{ id: string; post: unknown; author: unknown }>,
  payloads: readonly OutboxPayload[],
): StoredEntry[] {
  const entries: StoredEntry[] = []
  for (const p of posts) {
    const author = p.author ? `,"author":${JSON.stringify(p.author)}` : ''
    entries.push({ type: 'post', id: p.id, body: `{"data":${JSON.stringify(p.post)}${author}}` })
  }
  entries.push(...userChangeEntries(payloads))
  return entries
}

const DATA_OPEN = Buffer.from('{"data":')
const AUTHOR_KEY = Buffer.from(',"author":')
const BODY_CLOSE = Buffer.from('}')

/** Per Post sent to the statement, the bytes of its stream entry's parts. */
type PostBytes = Map<string, { data: Buffer; author: Buffer | undefined }>

/** A batch ready for its statement, with what is needed once it committed. */
interface PreparedLines {
  params: PreparedBatch
  posts: PostBytes
  /** What the statement is sent, for RecentlyStored.remember after commit. */
  sent: SentRows
  /** Included copies left to another statement of this process (RecentlyStored.deferInFlight). */
  deferred: Deferred[]
}

/**
 * Normalizes a batch's lines and makes the statement's parameters, keeping of its objects only
 * what the time after commit needs: each sent Post's raw bytes and its author's (the same bytes
 * the parameters were built from), and the ids, times and names RecentlyStored remembers. A batch
 * waits on Postgres for most of its life; its parsed Posts (≈ 8 MB of objects and strings for 500
 * stream lines) held across that wait were copied by every scavenge, about a quarter of the
 * writer's CPU with four batches in flight. Bytes and small records are all that is left.
 */
function prepareLines(
  lines: readonly (string | Buffer)[],
  observedAt: string,
  recent: RecentlyStored | undefined,
): PreparedLines {
  const observedMs = Date.parse(observedAt)
  const normalizer = new BatchNormalizer(
    observedAt,
    recent ? { skipIncluded: (id) => recent.storedPost(id, observedMs) } : {},
  )
  for (const line of lines) {
    normalizer.addLine(lineText(line), typeof line === 'string' ? undefined : line)
  }
  const normalized = normalizer.result()
  const { batch, deferred } = recent
    ? recent.deferInFlight(recent.skipKnown(normalized))
    : { batch: normalized, deferred: [] }
  const bytes = new WireBytes()
  const params = prepareBatch(batch, bytes)
  // From the whole batch: a Post's author travels with it even when its row was not resent.
  const users = new Map(normalized.users.map((u) => [u.id, u]))
  const posts: PostBytes = new Map()
  // Deferred copies too: they are stored from here if their statement fails (storeOrphans).
  for (const p of [...batch.posts, ...deferred.map((d) => d.row)]) {
    const author = p.author_id ? users.get(p.author_id) : undefined
    posts.set(p.id, { data: bytes.of(p), author: author ? bytes.of(author) : undefined })
  }
  const sent: SentRows = {
    posts: batch.posts.map((p) => ({ id: p.id, observed_at: p.observed_at })),
    users: batch.users.map((u) => ({
      id: u.id,
      observed_at: u.observed_at,
      name: u.name,
      username: u.username,
    })),
  }
  return { params, posts, sent, deferred }
}

/** The entries of one outbox row, from the batch's bytes (no read back from Postgres). */
function freshFromMemory(posts: PostBytes, outbox: StoreResult['outbox']): FreshOutbox[] {
  return outbox.map(({ id, payload }) => {
    const entries: OutgoingEntry[] = []
    for (const postId of payload.post_ids) {
      const p = posts.get(postId)
      if (!p) continue
      // In parts: publishStored copies them straight into its request.
      const body = p.author
        ? [DATA_OPEN, p.data, AUTHOR_KEY, p.author, BODY_CLOSE]
        : [DATA_OPEN, p.data, BODY_CLOSE]
      entries.push({ type: 'post', id: postId, body })
    }
    entries.push(...userChangeEntries([payload]))
    return { id, payload, entries }
  })
}

/**
 * Stores a batch; if Postgres refuses some row as data (a value out of range, say), splits the
 * lines in halves until the offending lines are alone, and keeps each of those in ingest_rejects
 * with Postgres's reason. The rest of the batch is stored. Transient errors propagate, so BullMQ
 * retries the whole job with backoff. Returns what was newly stored, for publishing after commit.
 *
 * With `recent`, the included copies that another statement of this process is sending are left
 * to it (see RecentlyStored.deferInFlight); once this batch has committed, those whose statement
 * failed are stored here after all (storeOrphans), so none depends on a job that may never succeed.
 */
export async function storeLines(
  db: Db,
  lines: readonly (string | Buffer)[],
  observedAt: string,
  source: string,
  recent?: RecentlyStored,
): Promise<StoredLines> {
  const { params, posts, sent, deferred } = prepareLines(lines, observedAt, recent)
  const settle = recent?.sending(sent.posts)
  const main = await storePrepared(db, params, source).then(
    ({ outbox, ...result }): StoredLines => {
      settle?.(true)
      recent?.remember(sent)
      return { ...result, fresh: freshFromMemory(posts, outbox) }
    },
    (err: unknown) => {
      settle?.(false)
      return storeRefused(err, db, lines, observedAt, source, recent)
    },
  )
  return addStored(main, await storeOrphans(db, deferred, posts, source, recent))
}

/**
 * After a statement failed: a transient error propagates; a row Postgres refused is isolated by
 * halving the lines (each half is stored afresh, deferring to nothing of this failed attempt), and a
 * line refused alone is kept in ingest_rejects with Postgres's reason.
 */
async function storeRefused(
  err: unknown,
  ...[db, lines, observedAt, source, recent]: Parameters<typeof storeLines>
): Promise<StoredLines> {
  if (!isDataError(err)) throw err
  if (lines.length === 1) {
    const reason = `refused by Postgres: ${(err as Error).message}`
    const raw = lineText(lines[0]!).replaceAll('\u0000', '\\u0000')
    const { outbox: _none, ...result } = await storeBatch(
      db,
      { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 },
      source,
    )
    return { ...result, fresh: [] }
  }
  const mid = Math.ceil(lines.length / 2)
  const a = await storeLines(db, lines.slice(0, mid), observedAt, source, recent)
  const b = await storeLines(db, lines.slice(mid), observedAt, source, recent)
  return addStored(a, b)
}

/**
 * Of the copies a batch deferred, stores those whose statement failed, once each has settled (each
 * was sent by a statement that started before this batch's, so none waits on this one).
 */
async function storeOrphans(
  db: Db,
  deferred: readonly Deferred[],
  posts: PostBytes,
  source: string,
  recent?: RecentlyStored,
): Promise<StoredLines | undefined> {
  if (deferred.length === 0) return undefined
  const outcomes = await Promise.all(deferred.map((d) => d.committed))
  const orphans = deferred.filter((_, i) => !outcomes[i]).map((d) => d.row)
  if (orphans.length === 0) return undefined
  const batch = { posts: orphans, users: [], rejects: [], empty: 0 }
  const { outbox, ...result } = await storePrepared(db, prepareBatch(batch), source)
  recent?.remember(batch)
  return { ...result, fresh: freshFromMemory(posts, outbox) }
}

/** Two results of storing as one. */
function addStored(a: StoredLines, b: StoredLines | undefined): StoredLines {
  if (!b) return a
  return {
    inserted: a.inserted + b.inserted,
    updated: a.updated + b.updated,
    users: a.users + b.users,
    rejects: a.rejects + b.rejects,
    fresh: [...a.fresh, ...b.fresh],
  }
}

export function createWriter(deps: WriterDeps): Writer {
  const { db, redis, prefix, options, metrics } = deps
  const recent = new RecentlyStored()
  const log = deps.logger.child({ component: 'writer' })
  // Relayed outbox batches also become `activity` jobs (events for subscriptions, issue 7).
  const activity = createActivityQueue(redis, prefix, deps.logger)

  const publish = async (entries: OutgoingEntry[], payloads: OutboxPayload[]) => {
    await publishStored(redis, prefix, entries, options.streamRetentionMs)
    await enqueueActivity(activity, payloads)
  }
  const relayOnce = async (minAgeMs: number): Promise<number> => {
    let total = 0
    for (;;) {
      const n = await relayOutbox(
        db,
        RELAY_BATCH,
        (batch) => publish(streamEntries(batch.posts, batch.payloads), batch.payloads),
        { minAgeMs },
      )
      total += n
      if (n < RELAY_BATCH) return total
    }
  }
  /**
   * The fast path: right after commit, publish what a job newly stored from memory and drop its
   * outbox rows. If this fails (or the process dies first), the rows stay for the relay.
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
   * RELAY_MIN_AGE_MS to the writer that is publishing them from memory.
   */
  const relay = coalesced(relayOnce)
  const relaySafely = (minAgeMs = 0) =>
    relay(minAgeMs).catch((err: unknown) => {
      log.warn({ err }, 'relay failed; the outbox keeps the rows for the next pass')
      return 0
    })

  const processor = async (job: Job<PostsJob, PostsJobResult>): Promise<PostsJobResult> => {
    const jobLog = log.child({ jobId: job.id })
    const parsed = postsJobSchema.safeParse(job.data)
    if (!parsed.success) {
      // A payload we cannot read is kept where operators look, not retried forever.
      const raw = JSON.stringify(job.data ?? null).replaceAll('\\u0000', '\\\\u0000')
      const reason = `invalid posts job ${job.id}: ${parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')}`
      await storeBatch(db, { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }, 'queue')
      jobLog.warn(reason)
      metrics?.batchInvalid()
      return { inserted: 0, updated: 0, users: 0, rejects: 1, lines: 0 }
    }
    const { observed_at: observedAt, source } = parsed.data
    const started = performance.now()
    const lines = await loadPostsLines(redis, parsed.data)
    if (lines === undefined) {
      // Only a writer that committed this batch deletes its payload: it stopped before BullMQ
      // marked the job done, and the job came back. Nothing is left to store.
      jobLog.warn({ payload: parsed.data.payload }, 'payload gone: batch was stored already')
      return { inserted: 0, updated: 0, users: 0, rejects: 0, lines: 0 }
    }
    const { fresh, ...result } = await storeLines(db, lines, observedAt, source, recent)
    const seconds = (performance.now() - started) / 1000
    await publishFresh(fresh)
    try {
      await dropPostsPayload(redis, parsed.data)
    } catch (err) {
      // Committed all the same: a payload left behind costs memory, never a Post.
      log.warn({ err, payload: parsed.data.payload }, 'could not delete a stored payload')
    }
    metrics?.batchStored({ ...result, lines: lines.length, seconds })
    jobLog.debug(
      {
        lines: lines.length,
        ...result,
        ms: Math.round(performance.now() - started),
      },
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
