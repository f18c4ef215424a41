import { ensureBackfills, getBackfill, updateBackfill, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { UnrecoverableError, createQueue, createWorker, type Job } from '@threadline/queue'
import { type Redis } from '@threadline/redis'
import { UpstreamHttpError, type Page, type RateLimit, type UpstreamClient } from './upstream.js'

export interface BackfillJob {
  conversation_id: string
}

export interface BackfillOptions {
  search: 'recent' | 'all'
  concurrency: number
  /** First wait after a 429 without a reset time; doubles per repeat. */
  rateLimitBackoffMs: number
  /** The longest single wait on rate limits. */
  maxWaitMs: number
  lockDuration?: number
  stalledInterval?: number
}

/** Job ids are never all digits and never contain `:` (BullMQ). */
export const backfillJobId = (conversationId: string) => `conv-${conversationId}`

/**
 * Posts a page on to the `posts` queue; awaiting it is the backpressure. `pageId` names the page
 * within its backfill and is the same when the page is handed on again after an interruption (the
 * root, or the page count stored before it), so a retried add reuses one job and one payload key
 * instead of leaving the first attempt's payload behind. Never all digits, never a `:` (BullMQ).
 */
export type PageSink = (line: string, source: string, pageId: string) => Promise<void>

export interface BackfillDeps {
  db: Db
  upstream: UpstreamClient
  logger: Logger
  options: BackfillOptions
  sink: PageSink
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error('closing'))
    const done = () => {
      signal.removeEventListener('abort', abort)
      resolve()
    }
    const abort = () => {
      clearTimeout(timer)
      reject(new Error('closing'))
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', abort, { once: true })
  })
}

/**
 * Fetches one conversation's history: the root by id (the root may be older than the search
 * window), then every search page for `conversation_id:X`, following next_token. Each page goes to
 * the `posts` queue as one raw line, and progress is stored after each page, so a job that is
 * interrupted resumes after the last page it handed on (a page handed on twice is harmless: the
 * writer is idempotent).
 */
export class BackfillRunner {
  private readonly log: Logger
  /** Last rate-limit headers seen per endpoint, shared by the jobs of this process. */
  private readonly limits = new Map<string, RateLimit>()

  constructor(private readonly deps: BackfillDeps) {
    this.log = deps.logger.child({ component: 'backfill' })
  }

  private async call(
    endpoint: string,
    fn: () => Promise<Page>,
    signal: AbortSignal,
  ): Promise<Page> {
    const { rateLimitBackoffMs, maxWaitMs } = this.deps.options
    for (let limited = 0; ;) {
      const known = this.limits.get(endpoint)
      if (known?.remaining === 0 && known.resetAt !== undefined && known.resetAt > Date.now()) {
        const wait = Math.min(maxWaitMs, known.resetAt - Date.now())
        this.log.info({ endpoint, wait }, 'rate limit spent; waiting for its reset')
        await sleep(wait, signal)
        this.limits.delete(endpoint)
      }
      try {
        const page = await fn()
        this.limits.set(endpoint, page.rateLimit)
        return page
      } catch (err) {
        if (!(err instanceof UpstreamHttpError) || err.status !== 429) throw err
        limited += 1
        const reset = err.rateLimit.resetAt
        const wait = Math.min(
          maxWaitMs,
          reset !== undefined && reset > Date.now()
            ? reset - Date.now()
            : rateLimitBackoffMs * 2 ** (limited - 1),
        )
        this.log.info({ endpoint, wait, limited }, 'upstream answered 429; waiting')
        await sleep(wait, signal)
      }
    }
  }

  async run(conversationId: string, signal: AbortSignal): Promise<'done' | 'skipped'> {
    const { db, upstream, options, sink } = this.deps
    let row = await getBackfill(db, conversationId)
    if (!row) {
      await ensureBackfills(db, [conversationId])
      row = await getBackfill(db, conversationId)
    }
    if (!row || row.status === 'done' || row.status === 'failed') return 'skipped'
    await updateBackfill(db, conversationId, { kind: 'running', source: options.search })
    // The row's creation time tells one backfill of this conversation from a later one.
    const run = row.created_at.getTime()
    const pageId = (page: string) => `bf-${conversationId}-${run}-${page}`
    try {
      if (!row.root_fetched) {
        const root = await this.call(
          'lookup',
          () => upstream.lookup([conversationId], signal),
          signal,
        )
        if (root.resultCount > 0) await sink(root.body, 'backfill', pageId('root'))
        await updateBackfill(db, conversationId, { kind: 'root', posts: root.resultCount })
      }
      // pages > 0 with no token means the last page was handed on before an interruption.
      let token = row.next_token ?? undefined
      let more = row.pages === 0 || token !== undefined
      let pages = row.pages
      if (token) this.log.info({ conversationId, pages: row.pages }, 'resuming backfill')
      while (more) {
        const page = await this.call(
          `search-${options.search}`,
          () => upstream.search(options.search, `conversation_id:${conversationId}`, token, signal),
          signal,
        )
        if (page.resultCount > 0) await sink(page.body, 'backfill', pageId(String(pages)))
        pages += 1
        token = page.nextToken
        await updateBackfill(db, conversationId, {
          kind: 'page',
          nextToken: token ?? null,
          posts: page.resultCount,
        })
        more = token !== undefined
      }
      await updateBackfill(db, conversationId, { kind: 'done' })
      this.log.info({ conversationId }, 'backfill done')
      return 'done'
    } catch (err) {
      // A request the upstream refuses as such will not succeed on retry.
      if (
        err instanceof UpstreamHttpError &&
        err.status >= 400 &&
        err.status < 500 &&
        err.status !== 429
      ) {
        await updateBackfill(db, conversationId, {
          kind: 'failed',
          error: err.message.slice(0, 2_000),
        })
        throw new UnrecoverableError(err.message)
      }
      throw err
    }
  }
}

export interface BackfillQueue {
  /** Enqueues (or leaves queued) the backfill of each conversation not yet backfilled. */
  enqueue(conversationIds: readonly string[]): Promise<void>
  close(): Promise<void>
}

/** The producer side: records the backfills to do, then adds one job per conversation. */
export function createBackfillQueue(deps: {
  db: Db
  redis: Redis
  prefix: string
  logger: Logger
}): BackfillQueue {
  const queue = createQueue<BackfillJob>('backfill', {
    connection: deps.redis,
    prefix: deps.prefix,
    logger: deps.logger,
  })
  return {
    async enqueue(conversationIds) {
      const todo = await ensureBackfills(deps.db, conversationIds)
      if (todo.length === 0) return
      // The same job id while a job waits or runs makes a repeat add a no-op.
      await queue.addBulk(
        todo.map((b) => ({
          name: 'backfill',
          data: { conversation_id: b.conversation_id },
          opts: { jobId: backfillJobId(b.conversation_id) },
        })),
      )
    },
    close: () => queue.close(),
  }
}

/** The consumer side: a BullMQ worker running BackfillRunner; safe on every replica. */
export function createBackfillWorker(deps: BackfillDeps & { redis: Redis; prefix: string }) {
  const runner = new BackfillRunner(deps)
  const abort = new AbortController()
  const worker = createWorker<BackfillJob, string>(
    'backfill',
    async (job: Job<BackfillJob, string>) => {
      const id = job.data?.conversation_id
      if (typeof id !== 'string' || !/^\d{1,19}$/.test(id)) {
        throw new UnrecoverableError(`invalid backfill job ${job.id}: ${JSON.stringify(job.data)}`)
      }
      return runner.run(id, abort.signal)
    },
    { connection: deps.redis, prefix: deps.prefix, logger: deps.logger },
    {
      concurrency: deps.options.concurrency,
      lockDuration: deps.options.lockDuration ?? 30_000,
      stalledInterval: deps.options.stalledInterval ?? 30_000,
      maxStalledCount: 20,
    },
  )
  const log = deps.logger.child({ component: 'backfill' })
  worker.on('failed', (job, err) =>
    log.warn({ err, jobId: job?.id, attempts: job?.attemptsMade }, 'backfill job failed'),
  )
  return {
    runner,
    async start() {
      void worker.run().catch((err: unknown) => log.error({ err }, 'backfill worker stopped'))
      await worker.waitUntilReady()
    },
    async close() {
      // Interrupt waits and requests: the job fails this attempt and resumes from its progress.
      abort.abort()
      await worker.close()
    },
  }
}
