import type { FastifyInstance } from 'fastify'
import type { ServerContext } from '../types.js'
import { registerConversationList } from './list.js'
import { registerConversationTree } from './tree.js'
import { createTreeCache } from './tree-cache.js'

/** The conversation resources (docs/api.md §5): the list an app follows and each tree. */
export function registerConversationRoutes(app: FastifyInstance, ctx: ServerContext): void {
  registerConversationList(app, ctx)
  registerConversationTree(app, ctx, createTreeCache())
}
