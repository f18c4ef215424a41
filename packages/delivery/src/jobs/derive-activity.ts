import { deriveCandidates, matchEvents, type ActivityEvent } from '@threadline/activity'
import {
  activityPosts,
  candidateSubscriptions,
  claimActivitySources,
  queueWebhookEvents,
} from '@threadline/db'
import {
  activityJobSchema,
  enqueueWebhookDrain,
  publishActivity,
  type ActivityJob,
  type Job,
} from '@threadline/queue'
import type { DeliveryContext } from '../context.js'

export interface DeriveActivityResult {
  events: number
}

/**
 * The `activity` job: stored Posts and user changes become events, matched against the
 * subscriptions and deduplicated in Postgres, then published to open activity streams and queued
 * for their webhooks.
 */
export function deriveActivityJob(ctx: DeliveryContext) {
  const { db, redis, prefix, options, metrics, webhooksQueue } = ctx
  return async (job: Job<ActivityJob>): Promise<DeriveActivityResult> => {
    const jobLog = ctx.log.child({ jobId: job.id })
    const parsed = activityJobSchema.safeParse(job.data)
    if (!parsed.success) {
      // Nothing to retry: the payload will never read better. Logged and dropped.
      jobLog.warn({ issues: parsed.error.issues }, 'invalid activity job ignored')
      return { events: 0 }
    }
    const { post_ids: postIds, user_changes: changes } = parsed.data
    const posts = await activityPosts(db, postIds)
    const candidates = deriveCandidates(posts, changes)
    if (candidates.length === 0) return { events: 0 }
    const keys = new Map<string, { event_type: string; user_id: string }>()
    for (const c of candidates) keys.set(`${c.event_type}\n${c.user_id}`, c)
    const subs = await candidateSubscriptions(db, [...keys.values()])
    const matched = matchEvents(candidates, subs)
    if (matched.length === 0) return { events: 0 }
    // Sources already turned into events (a repeated job) fire nothing; the rest are recorded in
    // the same transaction as their webhook queue entries.
    const { fresh, webhooks } = await db.transaction().execute(async (trx) => {
      const claimed = await claimActivitySources(trx, [...new Set(matched.map((e) => e.source))])
      const fresh = matched.filter((e) => claimed.has(e.source))
      const webhooks = await queueWebhookEvents(
        trx,
        fresh
          .filter((e) => e.subscription.webhook_id !== null)
          .map((e) => ({
            webhook_id: e.subscription.webhook_id!,
            event_uuid: e.event_uuid,
            app_id: e.subscription.app_id,
            subscription_id: e.subscription.id,
            event_type: e.event_type,
            body: e.body,
          })),
      )
      return { fresh, webhooks }
    })
    await publishActivity(
      redis,
      prefix,
      fresh.map((e: ActivityEvent) => ({ app_id: e.subscription.app_id, body: e.body })),
      options.streamRetentionMs,
    )
    await enqueueWebhookDrain(webhooksQueue, webhooks)
    metrics?.eventsDerived(fresh.map((e) => e.event_type))
    jobLog.debug({ events: fresh.length, webhooks: webhooks.length }, 'events derived')
    return { events: fresh.length }
  }
}
