import { listUpstreamRules, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import type { Job } from '@threadline/queue'
import { refusedForGood, type UpstreamPacer } from '../pacer.js'
import type { UpstreamClient } from '../upstream.js'
import type { PageSink } from './backfill-conversation.js'

/** The job name of a window recovery in the `backfill` queue (beside `backfill`). */
export const RECOVER_JOB = 'recover'

/**
 * A window the stream missed (docs/architecture.md, "Recovery"): searched from after `since_id`
 * (or from `start_time`, when the mark is older than the search reaches) to now. The fields after
 * `until_at` are the job's progress, so a retried job resumes after its last page.
 */
export interface RecoverJob {
  since_id?: string
  start_time?: string
  /** When the stream came back (ISO): the time to close the window is counted from here. */
  until_at: string
  /** The OR-combined rule values, fixed on the first attempt. */
  queries?: string[]
  /** The query in progress, its next page and pages so far. */
  query?: number
  next_token?: string
  pages?: number
  /** Posts the search found so far. */
  found?: number
}

/** Job ids are never all digits and never contain `:` (BullMQ): one window per reconnect. */
export const recoverJobId = (untilMs: number) => `recover-${untilMs}`

/**
 * The values OR-combined into as few queries as fit `maxLength` characters, in a stable order; a
 * value with a space is bracketed (AND binds tighter than OR). A value longer than the limit goes
 * alone (the upstream refuses it and that query is skipped).
 */
export function orQueries(values: readonly string[], maxLength: number): string[] {
  const queries: string[] = []
  let current = ''
  for (const value of [...new Set(values)].sort()) {
    const term = /\s/.test(value) ? `(${value})` : value
    const joined = current === '' ? term : `${current} OR ${term}`
    if (current !== '' && joined.length > maxLength) {
      queries.push(current)
      current = term
    } else current = joined
  }
  if (current !== '') queries.push(current)
  return queries
}

export interface RecoverWindowDeps {
  db: Db
  upstream: UpstreamClient
  pacer: UpstreamPacer
  sink: PageSink
  logger: Logger
  metrics?: IngestMetrics
  options: { search: 'recent' | 'all'; queryMaxLength: number }
}

/**
 * Recovers one window: every active rule value, OR-combined, searched after the mark and paged to
 * the end; each page goes to the `posts` queue as backfill (what is already stored is harmless,
 * every write being idempotent). Within the search rate limit through the shared pacer.
 */
export async function recoverWindow(
  job: Job<RecoverJob>,
  deps: RecoverWindowDeps,
  signal: AbortSignal,
): Promise<string> {
  const { options, upstream } = deps
  const log = deps.logger.child({ component: 'recovery', job: job.id })
  let data = job.data
  if (data.queries === undefined) {
    const values = (await listUpstreamRules(deps.db))
      .filter((r) => r.status === 'active')
      .map((r) => r.value)
    data = { ...data, queries: orQueries(values, options.queryMaxLength), query: 0, pages: 0 }
    await job.updateData(data)
  }
  const queries = data.queries ?? []
  const bounds = { since_id: data.since_id, start_time: data.start_time }
  for (let q = data.query ?? 0; q < queries.length; q++) {
    let token = data.next_token
    do {
      let page
      try {
        page = await deps.pacer.call(
          `search-${options.search}`,
          () => upstream.search(options.search, queries[q]!, token, signal, bounds),
          signal,
        )
      } catch (err) {
        if (!refusedForGood(err)) throw err
        log.warn({ err, query: queries[q] }, 'the upstream refused a recovery query; skipped')
        break
      }
      const pages = data.pages ?? 0
      if (page.resultCount > 0) await deps.sink(page.body, 'backfill', `${job.id}-${q}-${pages}`)
      token = page.nextToken
      data = { ...data, query: q, next_token: token, pages: pages + 1 }
      data.found = (data.found ?? 0) + page.resultCount
      await job.updateData(data)
    } while (token !== undefined)
    data = { ...data, query: q + 1, next_token: undefined }
  }
  const closeSeconds = (Date.now() - Date.parse(data.until_at)) / 1_000
  deps.metrics?.windowRecovered('search', data.found ?? 0, closeSeconds)
  log.info(
    { found: data.found ?? 0, queries: queries.length, pages: data.pages, closeSeconds },
    'stream window recovered by search',
  )
  return 'recovered'
}
