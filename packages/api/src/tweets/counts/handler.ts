import type { FastifyInstance } from 'fastify'
import { countPosts } from '@threadline/db'
import { countsPage } from '../../counts-page.js'
import { countsJson } from '../../pipeline/index.js'
import { compileQuery } from '../../query-language.js'
import { COUNTS_ALL, COUNTS_RECENT, type COUNTS_PARAMS } from './spec.js'
import type { ServerContext } from '../../types.js'
import { addRoute, type Body, type RouteContext } from '../../routes/route.js'
import { DAY_MS, invalidToken, pageToken, timeWindow, tokenScope } from '../../routes/window.js'

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
    // Pages go backwards in time; a token holds the end of the next (older) page.
    let position: number | undefined
    const token = pageToken(c.params)
    if (token) {
      const decoded = pageTokens.decode(scope, token.value)
      position = decoded !== undefined && /^\d{1,15}$/.test(decoded) ? Number(decoded) : NaN
    }
    const page =
      position === undefined || !Number.isNaN(position)
        ? countsPage({ start: startTime, end: endTime }, granularity, position)
        : undefined
    if (!page) throw invalidToken(token!.name, token!.value)
    const buckets =
      page.end > page.start
        ? await countPosts(readDb, condition, {
            ...w,
            startTime: page.start,
            endTime: page.end,
            granularity,
          })
        : []
    const total = buckets.reduce((sum, b) => sum + b.tweet_count, 0)
    const meta: Body = { total_tweet_count: total }
    if (page.next !== undefined) meta.next_token = pageTokens.encode(scope, String(page.next))
    return { json: countsJson(buckets, meta) }
  }

  addRoute(app, ctx, COUNTS_RECENT, counts('recent'))
  addRoute(app, ctx, COUNTS_ALL, counts('all'))
}
