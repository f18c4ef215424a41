import { compareIds } from '@threadline/domain'
import { FIELD_PARAMS, id, int, invalid, requiredText, text, time } from '../params.js'
import { IncludesBuilder, postJson, viewOf } from '../serialize.js'
import type { SimPost } from '../world.js'
import { defineRoute, type RouteCall, type SimContext, type SimRoute } from './route.js'

const SEVEN_DAYS_MS = 7 * 86_400_000

const searchParams = (maxResults: number) =>
  ({
    query: requiredText,
    max_results: int(10, 10, maxResults),
    next_token: text,
    pagination_token: text,
    since_id: id,
    until_id: id,
    start_time: time,
    end_time: time,
    sort_order: text,
    ...FIELD_PARAMS,
  }) as const

/** A page token carries a check of its query, so a token from another search is refused. */
function queryCheck(query: string): string {
  let h = 2166136261
  for (let i = 0; i < query.length; i++) h = Math.imul(h ^ query.charCodeAt(i), 16777619)
  return (h >>> 0).toString(36)
}

function* reversed<T>(items: readonly T[]): Iterable<T> {
  for (let i = items.length - 1; i >= 0; i--) yield items[i]!
}

/** `GET /2/tweets/search/recent` and `/all`, newest first, over the world's Posts. */
export function searchRoutes({ world, compile }: SimContext): SimRoute[] {
  const search =
    (kind: 'recent' | 'all') =>
    ({ params }: RouteCall<ReturnType<typeof searchParams>>) => {
      const query = params.query
      const max = params.max_results
      const sinceId = params.since_id
      const untilId = params.until_id
      const startMs = params.start_time?.ms
      const endMs = params.end_time?.ms
      const now = Date.now()
      const floorMs = kind === 'recent' ? now - SEVEN_DAYS_MS : 0
      if (params.start_time && params.start_time.ms < floorMs) {
        const bound = new Date(floorMs).toISOString().slice(0, 16) + 'Z'
        const raw = params.start_time.raw
        throw invalid(
          'start_time',
          raw,
          `Invalid 'start_time':'${raw}'. 'start_time' must be on or after ${bound}`,
        )
      }
      const token = params.next_token ?? params.pagination_token
      let beforeId: string | undefined
      if (token !== undefined) {
        const [id, check] = Buffer.from(token, 'base64url').toString('utf8').split(':')
        if (!id || !/^\d{1,19}$/.test(id) || check !== queryCheck(query)) {
          const name = params.next_token !== undefined ? 'next_token' : 'pagination_token'
          throw invalid(
            name,
            token,
            `The \`${name}\` query parameter value [${token}] is not valid`,
          )
        }
        beforeId = id
      }
      const compiled = compile(query)
      if (!compiled.ok) {
        throw invalid(
          'query',
          query,
          `There were errors processing your request: ${compiled.reason}`,
        )
      }
      const { conversationIds, test } = compiled.rule
      let candidates: Iterable<SimPost>
      if (conversationIds) {
        const lists = conversationIds.map((id) => world.conversation(id) ?? [])
        candidates =
          lists.length === 1
            ? reversed(lists[0]!)
            : lists.flat().sort((a, b) => compareIds(b.id, a.id))
      } else candidates = world.newestFirst()
      const lowMs = Math.max(floorMs, startMs ?? 0)
      const page: SimPost[] = []
      let more = false
      for (const post of candidates) {
        // Newest first: once below the lower bounds, nothing further can match.
        if (post.createdMs < lowMs) break
        if (sinceId !== undefined && compareIds(post.id, sinceId) <= 0) break
        if (beforeId !== undefined && compareIds(post.id, beforeId) >= 0) continue
        if (untilId !== undefined && compareIds(post.id, untilId) >= 0) continue
        if (endMs !== undefined && post.createdMs >= endMs) continue
        if (test && !test(post.wire)) continue
        if (page.length === max) {
          more = true
          break
        }
        page.push(post)
      }
      if (page.length === 0) return { status: 200, body: '{"meta":{"result_count":0}}' }
      const view = viewOf(params)
      const includes = new IncludesBuilder(world, view)
      for (const post of page) includes.add(post)
      const meta: Record<string, unknown> = {
        newest_id: page[0]!.id,
        oldest_id: page[page.length - 1]!.id,
        result_count: page.length,
      }
      if (more) {
        meta.next_token = Buffer.from(`${page[page.length - 1]!.id}:${queryCheck(query)}`).toString(
          'base64url',
        )
      }
      const data = page.map((p) => postJson(world, p, view)).join(',')
      return {
        status: 200,
        body: `{"data":[${data}]${includes.suffix()},"meta":${JSON.stringify(meta)}}`,
      }
    }
  return [
    defineRoute(
      {
        method: 'GET',
        path: '/2/tweets/search/recent',
        fault: 'search',
        window: '/2/tweets/search/recent',
        params: searchParams(100),
      },
      search('recent'),
    ),
    defineRoute(
      {
        method: 'GET',
        path: '/2/tweets/search/all',
        fault: 'search',
        window: '/2/tweets/search/all',
        params: searchParams(500),
      },
      search('all'),
    ),
  ]
}
