import type { FastifyInstance } from 'fastify'
import type { ServerContext } from '../types.js'
import { registerConversationExport } from './export.js'
import { registerConversationList } from './list.js'
import { registerConversationMetrics } from './metrics.js'
import { registerConversationTree } from './tree.js'
import { createTreeCache } from './tree-cache.js'

export { exportConversation, type ConversationExport, type ExportTree } from './export.js'
export { createMetricsCache, followedConversations, metricsTable } from './metrics.js'

/** The conversation resources (docs/api.md §5): the list an app follows, each tree, its export. */
export function registerConversationRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const trees = createTreeCache()
  registerConversationList(app, ctx)
  registerConversationTree(app, ctx, trees)
  registerConversationMetrics(app, ctx)
  registerConversationExport(app, ctx, async (db, id) =>
    (await trees.get(db, id, 'oldest')).tree('oldest'),
  )
}
