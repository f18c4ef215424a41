import type { FastifyInstance } from 'fastify'
import { countPosts } from '@threadline/db'
import { compileQuery } from '../query-language.js'
import { COUNTS_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { jsonArray, jsonObject } from './fields.js'
import { addRoute, type Body, type Endpoint, type RouteContext } from './route.js'
import { DAY_MS, invalidToken, pageToken, timeWindow, tokenScope } from './window.js'

export const COUNTS_RECENT = {
  method: 'GET',
  url: '/2/tweets/counts/recent',
  name: 'counts-recent',
  group: 'counts',
  params: COUNTS_PARAMS,
  summary: 'Counts, last 7 days',
} as const satisfies Endpoint<typeof COUNTS_PARAMS>

export const COUNTS_ALL = {
  method: 'GET',
  url: '/2/tweets/counts/all',
  name: 'counts-all',
  group: 'counts',
  params: COUNTS_PARAMS,
  summary: 'Counts, everything',
} as const satisfies Endpoint<typeof COUNTS_PARAMS>

/** Post counts by minute, hour or day (docs/api.md §2.6). */
export function registerCountsRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { readDb, options, pageTokens } = ctx

  const counts = (kind: 'recent' | 'all') => async (c: RouteContext<typeof COUNTS_PARAMS>) => {
    const query = c.params.query
    const { condition } = compileQuery(query, options.queryMaxLength)
    const now = c.now
    const w = timeWindow(c.request, c.params, now, kind === 'recent')
    const latest = new Date(now.getTime() - 10_000)
    const endTime = w.endTime && w.endTime < latest ? w.endTime : latest
    const startTime = w.startTime ?? new Date(endTime.getTime() - 30 * DAY_MS)
    const granularity = c.params.granularity ?? 'hour'
    const scope = tokenScope(c.request, `counts/${kind}`, query, w, granularity)
    // counts/all pages backwards by 31 days; the token holds the end of the next (older) page.
    let pageEnd = endTime
    const token = pageToken(c.params)
    if (token) {
      const position = pageTokens.decode(scope, token.value)
      const ms = position !== undefined && /^\d{1,15}$/.test(position) ? Number(position) : NaN
      if (Number.isNaN(ms)) throw invalidToken(token.name, token.value)
      pageEnd = new Date(ms)
    }
    let pageStart = startTime
    if (kind === 'all' && pageEnd.getTime() - startTime.getTime() > 31 * DAY_MS) {
      pageStart = new Date(pageEnd.getTime() - 31 * DAY_MS)
    }
    const buckets =
      pageEnd > pageStart
        ? await countPosts(readDb, condition, {
            ...w,
            startTime: pageStart,
            endTime: pageEnd,
            granularity,
          })
        : []
    const total = buckets.reduce((sum, b) => sum + b.tweet_count, 0)
    const meta: Body = { total_tweet_count: total }
    if (pageStart > startTime)
      meta.next_token = pageTokens.encode(scope, String(pageStart.getTime()))
    // Hundreds of buckets a page: written as text (their times come formatted from Postgres).
    const data = buckets.map(
      (b) => `{"end":"${b.end}","start":"${b.start}","tweet_count":${b.tweet_count}}`,
    )
    return {
      json: jsonObject([
        ['data', jsonArray(data)],
        ['meta', JSON.stringify(meta)],
      ]),
    }
  }

  addRoute(app, ctx, COUNTS_RECENT, counts('recent'))
  addRoute(app, ctx, COUNTS_ALL, counts('all'))
}
