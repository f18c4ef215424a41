import {
  Queue,
  QueueEvents,
  Worker,
  UnrecoverableError,
  type JobsOptions,
  type Processor,
} from 'bullmq'
import { isCluster, type Redis } from '@threadline/redis'
import { z } from 'zod'
import type { Logger } from '@threadline/logger'

export { UnrecoverableError }
export type { Job } from 'bullmq'

/**
 * The most lines and bytes one `posts` job carries: the ingest and the import cut batches there. A
 * batch is one transaction; larger ones hold row locks longer without storing faster.
 */
export const POSTS_BATCH_MAX_LINES = 500
export const POSTS_BATCH_MAX_BYTES = 4 * 1024 * 1024

/**
 * A batch of raw upstream lines (stream lines, response pages, twarc2 output) for the writer. The
 * lines are a Redis list at `payload`, beside the job (see posts-payload.ts); `count` is how many.
 */
export const postsJobSchema = z.object({
  /** Where the lines came from, kept with any reject: `stream`, `backfill`, `import:<file>`. */
  source: z.string().min(1).max(500),
  /** When the upstream gave these copies (RFC 3339); later copies replace earlier ones. */
  observed_at: z.iso.datetime({ offset: true }),
  payload: z.string().min(1),
  count: z.number().int().positive(),
})
export type PostsJob = z.infer<typeof postsJobSchema>

export interface PostsJobResult {
  inserted: number
  updated: number
  users: number
  rejects: number
  lines: number
}

/**
 * One table from queue to its job options, so that retry and retention policy live in one place.
 * `posts`: a transient failure (Postgres restarting) must never drop a batch, so attempts are
 * effectively unbounded with capped exponential backoff; bad payloads fail at once through
 * UnrecoverableError and stay in the failed set for inspection.
 */
/** Work that a transient failure (Postgres or Redis restarting) must never drop. */
const NEVER_DROP = {
  attempts: 1_000_000,
  backoff: { type: 'capped-exponential', delay: 500 },
  removeOnComplete: { count: 1_000, age: 3_600 },
  removeOnFail: { count: 10_000, age: 7 * 24 * 3_600 },
} satisfies JobsOptions

export const QUEUES = {
  posts: { name: 'posts', jobOptions: NEVER_DROP },
  /**
   * `backfill`: one job per conversation (job id `conv-<id>`, so a repeat add is a no-op while it
   * waits); progress lives in the `backfills` table, so a retry resumes from its next_token.
   * Failures are upstream trouble (rate limits, outages): a long capped backoff, then the job
   * stays failed for an operator.
   */
  backfill: {
    name: 'backfill',
    jobOptions: {
      attempts: 50,
      backoff: { type: 'capped-exponential', delay: 1_000 },
      removeOnComplete: { count: 1_000, age: 24 * 3_600 },
      removeOnFail: { count: 10_000, age: 7 * 24 * 3_600 },
    } satisfies JobsOptions,
  },
  /**
   * `compliance`: withdrawals learnt from the upstream (its compliance streams or batch jobs), for
   * the writer to apply. Applying is idempotent in Postgres, and a withdrawal must never be
   * dropped (docs/architecture.md, "Compliance"): like `posts`.
   */
  compliance: { name: 'compliance', jobOptions: NEVER_DROP },
  // --- activity ---
  /**
   * `activity`: what a relayed outbox batch stored, turned into events by the delivery service.
   * Like `posts`, a transient failure must never drop it; events are deduplicated in Postgres.
   */
  activity: { name: 'activity', jobOptions: NEVER_DROP },
  /**
   * `webhooks`: "drain webhook W". The events and their order, attempts and backoff live in
   * Postgres (webhook_deliveries); a job only wakes a sender, so retries here cover Postgres or
   * Redis trouble, not the receiver's.
   */
  webhooks: {
    name: 'webhooks',
    jobOptions: {
      attempts: 1_000,
      backoff: { type: 'capped-exponential', delay: 500 },
      removeOnComplete: { count: 1_000, age: 600 },
      removeOnFail: { count: 10_000, age: 7 * 24 * 3_600 },
    } satisfies JobsOptions,
  },
} as const

export type QueueName = keyof typeof QUEUES

/** Exponential from `delay`, doubling per attempt, capped at one minute, with ±20% jitter. */
export function cappedBackoff(attemptsMade: number, delay = 500, cap = 60_000): number {
  const base = Math.min(cap, delay * 2 ** Math.max(0, attemptsMade - 1))
  return Math.round(base * (0.8 + Math.random() * 0.4))
}

export interface QueueDeps {
  connection: Redis
  prefix: string
  logger: Logger
}

/** True when `key` has a Redis Cluster hash tag: a non-empty `{…}`, the first `{` to the next `}`. */
export function hasHashTag(key: string): boolean {
  const open = key.indexOf('{')
  if (open < 0) return false
  const close = key.indexOf('}', open + 1)
  return close > open + 1
}

/**
 * The BullMQ prefix of a queue. BullMQ's scripts touch many keys of one queue at once, which a
 * Redis Cluster allows only within one hash slot. On a cluster each queue therefore gets its own
 * hash tag, `<prefix>:{<queue>}` (keys `threadline:{posts}:posts:wait`, …): a queue's keys share a
 * slot while different queues spread over the nodes. A prefix that already holds a hash tag is kept
 * as it is (the operator chose one slot for everything). One server: the prefix, unchanged.
 */
export function queuePrefix(prefix: string, name: QueueName, connection: Redis): string {
  if (!isCluster(connection) || hasHashTag(prefix)) return prefix
  return `${prefix}:{${QUEUES[name].name}}`
}

/**
 * Calls `onCompleted` with the result of each job of queue `name` that completes from now on, read
 * from BullMQ's events stream on `connection` (a blocking read holds it: give it a connection of
 * its own, role `worker`). Events are fire-and-forget: for watching progress, not for accounting.
 */
export async function onCompletedJobs<R>(
  name: QueueName,
  prefix: string,
  connection: Redis,
  onCompleted: (result: R) => void,
): Promise<{ close(): Promise<void> }> {
  const events = new QueueEvents(QUEUES[name].name, {
    connection,
    prefix: queuePrefix(prefix, name, connection),
  })
  events.on('error', () => {})
  events.on('completed', ({ returnvalue }) => {
    // BullMQ hands the stored JSON text, or the value already parsed, depending on its version.
    onCompleted((typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as R)
  })
  await events.waitUntilReady()
  return { close: () => events.close() }
}

export function createQueue<T = unknown, R = unknown>(
  name: QueueName,
  deps: QueueDeps,
): Queue<T, R> {
  const queue = new Queue<T, R>(QUEUES[name].name, {
    connection: deps.connection,
    prefix: queuePrefix(deps.prefix, name, deps.connection),
    defaultJobOptions: QUEUES[name].jobOptions,
  })
  const log = deps.logger.child({ component: 'queue', queue: name })
  queue.on('error', (err) => log.warn({ err }, 'queue error'))
  return queue
}

export interface WorkerOptions {
  concurrency: number
  lockDuration: number
  stalledInterval: number
  maxStalledCount: number
}

export function createWorker<T, R>(
  name: QueueName,
  processor: Processor<T, R>,
  deps: QueueDeps,
  options: WorkerOptions,
): Worker<T, R> {
  const worker = new Worker<T, R>(QUEUES[name].name, processor, {
    connection: deps.connection,
    prefix: queuePrefix(deps.prefix, name, deps.connection),
    concurrency: options.concurrency,
    lockDuration: options.lockDuration,
    stalledInterval: options.stalledInterval,
    // A job whose worker died is retried, not failed: `maxStalledCount` is generous on purpose.
    maxStalledCount: options.maxStalledCount,
    autorun: false,
    settings: {
      backoffStrategy: (attemptsMade: number) => cappedBackoff(attemptsMade),
    },
  })
  const log = deps.logger.child({ component: 'worker', queue: name })
  worker.on('error', (err) => log.error({ err }, 'worker error'))
  return worker
}
