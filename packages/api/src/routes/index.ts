import type { FastifyInstance } from 'fastify'
import type { Redis } from '@threadline/redis'
import { DEFAULT_ACTIVITY_OPTIONS, type ActivityApiOptions } from '../activity/options.js'
import { registerConversationRoutes } from '../conversations/index.js'
import type { ComplianceApiOptions, ServerContext } from '../types.js'
import { registerActivityStreamRoute } from './activity-stream.js'
import { registerSubscriptionRoutes } from './activity-subscriptions.js'
import { registerComplianceJobRoutes } from './compliance-jobs.js'
import { registerComplianceStreamRoutes } from './compliance-streams.js'
import { DEFAULT_COMPLIANCE_OPTIONS } from '../compliance/options.js'
import { registerCountsRoutes } from '../tweets/counts/handler.js'
import { registerLookupRoutes } from '../tweets/lookup/handler.js'
import { registerQuoteRoutes } from './quotes.js'
import { registerRulesRoutes } from './rules.js'
import { registerSearchRoutes } from '../tweets/search/handler.js'
import { registerTimelineRoutes } from './timelines.js'
import { registerUserRoutes } from './users.js'
import { registerWebhookRoutes } from './webhooks.js'

/**
 * Every `/2/` route but the filtered stream (registered beside its hub, routes/stream.ts), one
 * file per resource; the conversation resources live in conversations/, the Post resources in
 * tweets/ (a folder each: spec, handler, tests).
 */
export function registerRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  deps: {
    redis: Redis
    prefix: string
    activity?: Partial<ActivityApiOptions>
    compliance?: Partial<ComplianceApiOptions>
  },
): void {
  const activity = { ...DEFAULT_ACTIVITY_OPTIONS, ...deps.activity }
  registerLookupRoutes(app, ctx)
  registerSearchRoutes(app, ctx)
  registerCountsRoutes(app, ctx)
  registerRulesRoutes(app, ctx)
  registerConversationRoutes(app, ctx)
  registerUserRoutes(app, ctx)
  registerTimelineRoutes(app, ctx)
  registerQuoteRoutes(app, ctx)
  registerSubscriptionRoutes(app, ctx, activity)
  registerWebhookRoutes(app, ctx, activity)
  registerActivityStreamRoute(app, ctx, {
    redis: deps.redis,
    prefix: deps.prefix,
    options: activity,
  })
  const compliance = { ...DEFAULT_COMPLIANCE_OPTIONS, ...deps.compliance }
  registerComplianceJobRoutes(app, ctx, compliance)
  registerComplianceStreamRoutes(app, ctx, {
    redis: deps.redis,
    prefix: deps.prefix,
    options: compliance,
  })
}
