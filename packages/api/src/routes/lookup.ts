import type { FastifyInstance } from 'fastify'
import { postsByIds, wirePostsByIds } from '@threadline/db'
import { notFound, primaryFields } from '@threadline/domain'
import { LOOKUP_ONE_PARAMS, LOOKUP_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { fieldSelection, jsonArray, jsonObject, jsonOf } from './fields.js'
import { renderPosts } from '../render.js'
import { addRoute, compact, type Endpoint } from './route.js'

export const LOOKUP = {
  method: 'GET',
  url: '/2/tweets',
  name: 'tweets-lookup',
  group: 'lookup',
  params: LOOKUP_PARAMS,
  summary: 'Posts by ids',
} as const satisfies Endpoint<typeof LOOKUP_PARAMS>

export const LOOKUP_ONE = {
  method: 'GET',
  url: '/2/tweets/:id',
  name: 'tweets-lookup-one',
  group: 'lookup',
  params: LOOKUP_ONE_PARAMS,
  summary: 'A Post by id',
} as const satisfies Endpoint<typeof LOOKUP_ONE_PARAMS>

/** Post lookup by ids (docs/api.md §2.3). Posts come from the replica when there is one. */
export function registerLookupRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { readDb } = ctx

  addRoute(app, ctx, LOOKUP, async (c) => {
    const ids = [...new Set(c.params.ids)]
    const sel = fieldSelection(c.params)
    if (sel.expansions.size === 0) {
      // Wire JSON text from Postgres when there are no includes: `bench api` shows it ≥ 1.5× faster.
      const rows = await wirePostsByIds(readDb, ids, [...primaryFields(sel)])
      const found = new Map(rows.map((r) => [r.id, r.json]))
      const data = ids.flatMap((id) => found.get(id) ?? [])
      const missing = ids.filter((id) => !found.has(id)).map((id) => notFound('tweet', 'ids', id))
      return {
        json: jsonObject([
          ['data', jsonArray(data)],
          ['errors', jsonOf(missing)],
        ]),
      }
    }
    const rows = await postsByIds(readDb, ids)
    const found = new Map(rows.map((r) => [r.id, r]))
    const ordered = ids.flatMap((id) => {
      const row = found.get(id)
      return row ? [row] : []
    })
    const page = await renderPosts(readDb, ordered, sel)
    const missing = ids.filter((id) => !found.has(id)).map((id) => notFound('tweet', 'ids', id))
    return {
      body: compact({
        data: page.data,
        includes: page.includes,
        errors: [...missing, ...page.errors],
      }),
    }
  })

  addRoute(app, ctx, LOOKUP_ONE, async (c) => {
    const id = c.params.id
    const sel = fieldSelection(c.params)
    if (sel.expansions.size === 0) {
      const [row] = await wirePostsByIds(readDb, [id], [...primaryFields(sel)])
      if (!row) return { body: { errors: [notFound('tweet', 'id', id)] } }
      return { json: jsonObject([['data', row.json]]) }
    }
    const rows = await postsByIds(readDb, [id])
    if (rows.length === 0) return { body: { errors: [notFound('tweet', 'id', id)] } }
    const page = await renderPosts(readDb, rows, sel)
    return {
      body: compact({ data: page.data[0], includes: page.includes, errors: page.errors }),
    }
  })
}
