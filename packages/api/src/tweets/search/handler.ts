import type { FastifyInstance } from 'fastify'
import { isId } from '@threadline/domain'
import { pageJson, readSearchPage } from '../../pipeline/index.js'
import { compileQuery } from '../../query-language.js'
import {
  SEARCH_ALL,
  SEARCH_RECENT,
  type SEARCH_ALL_PARAMS,
  type SEARCH_RECENT_PARAMS,
} from './spec.js'
import type { ServerContext } from '../../types.js'
import { fieldSelection } from '../../routes/fields.js'
import { addRoute, type Body, type RouteContext } from '../../routes/route.js'
import { invalidToken, pageToken, timeWindow, tokenScope } from '../../routes/window.js'

/** Search, newest first, in pages (docs/api.md §2.4). */
export function registerSearchRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { readDb, options, pageTokens } = ctx

  const search =
    (kind: 'recent' | 'all') =>
    async (c: RouteContext<typeof SEARCH_RECENT_PARAMS | typeof SEARCH_ALL_PARAMS>) => {
      const query = c.params.query
      const { condition, prepared } = compileQuery(query, options.queryMaxLength)
      const w = timeWindow(c.request, c.params, c.now, kind === 'recent')
      const limit = c.params.max_results ?? 10
      const scope = tokenScope(c.request, `search/${kind}`, query, w)
      const token = pageToken(c.params)
      let beforeId: string | undefined
      if (token) {
        beforeId = pageTokens.decode(scope, token.value)
        if (beforeId === undefined || !isId(beforeId)) throw invalidToken(token.name, token.value)
      }
      const window = { ...w, beforeId, limit, prepared }
      const page = await readSearchPage(readDb, condition, window, fieldSelection(c.params))
      if (page.ids.length === 0) return { body: { meta: { result_count: 0 } } }
      const oldest = page.ids[page.ids.length - 1]!
      const meta: Body = {
        newest_id: page.ids[0]!,
        oldest_id: oldest,
        result_count: page.ids.length,
      }
      if (page.more) meta.next_token = pageTokens.encode(scope, oldest)
      return { json: pageJson(page, { meta }) }
    }

  addRoute(app, ctx, SEARCH_RECENT, search('recent'))
  addRoute(app, ctx, SEARCH_ALL, search('all'))
}
