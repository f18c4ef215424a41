import type { FastifyInstance } from 'fastify'
import { pageJson, readPosts } from '../../pipeline/index.js'
import { LOOKUP, LOOKUP_ONE } from './spec.js'
import type { ServerContext } from '../../types.js'
import { fieldSelection } from '../../routes/fields.js'
import { addRoute } from '../../routes/route.js'

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
