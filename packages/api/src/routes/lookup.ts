import type { FastifyInstance } from 'fastify'
import { pageJson, readPosts } from '../pipeline/index.js'
import { LOOKUP_ONE_PARAMS, LOOKUP_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { fieldSelection } from './fields.js'
import { addRoute, type Endpoint } from './route.js'

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
    const page = await readPosts(readDb, c.params.ids, fieldSelection(c.params), {
      notFoundAs: 'ids',
    })
    return { json: pageJson(page) }
  })

  addRoute(app, ctx, LOOKUP_ONE, async (c) => {
    const page = await readPosts(readDb, [c.params.id], fieldSelection(c.params), {
      notFoundAs: 'id',
    })
    return { json: pageJson(page, { one: true }) }
  })
}
