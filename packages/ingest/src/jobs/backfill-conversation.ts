import { ensureBackfills, getBackfill, updateBackfill, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { UnrecoverableError } from '@threadline/queue'
import { refusedForGood, UpstreamPacer } from '../pacer.js'
import type { UpstreamClient } from '../upstream.js'

/** The `backfill` job of one conversation (job name `backfill`). */
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
  /** Shared with window recovery, which spends the same search window (made here when absent). */
  pacer?: UpstreamPacer
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
  readonly pacer: UpstreamPacer

  constructor(private readonly deps: BackfillDeps) {
    this.log = deps.logger.child({ component: 'backfill' })
    this.pacer = deps.pacer ?? new UpstreamPacer(deps.options, deps.logger)
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
        const root = await this.pacer.call(
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
        const page = await this.pacer.call(
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
      if (refusedForGood(err)) {
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
