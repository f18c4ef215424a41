import type { Config } from '@threadline/config'
import {
  createDb,
  listWebhookFailures,
  replayWebhookFailures,
  type Db,
  type WebhookFailure,
} from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { createQueue, enqueueWebhookDrain } from '@threadline/queue'
import { closeRedis, createRedis, type Redis } from '@threadline/redis'
import { reachRedis } from '../failure.js'
import { appOption, out, UsageError } from '../output.js'

const USAGE = 'usage: threadline webhooks failures [--app ID] | webhooks replay FAILURE_ID…'

export interface FailureLine {
  id: string
  app_id: string
  webhook_id: string
  subscription_id: string
  event_uuid: string
  event_type: string
  url: string
  attempts: number
  reason: string
  created_at: string
}

function failureLine(f: WebhookFailure): FailureLine {
  return {
    id: f.id,
    app_id: f.app_id,
    webhook_id: f.webhook_id,
    subscription_id: f.subscription_id,
    event_uuid: f.event_uuid,
    event_type: f.event_type,
    url: f.url,
    attempts: f.attempts,
    reason: f.reason,
    created_at: new Date(f.created_at as unknown as string).toISOString(),
  }
}

/** Parked deliveries not yet replayed, oldest first. */
export async function webhookFailures(db: Db, appId?: string): Promise<FailureLine[]> {
  return (await listWebhookFailures(db, { appId, limit: 100_000 })).map(failureLine)
}

/** Puts parked deliveries back in their webhooks' queues and wakes the senders. */
export async function replayWebhooks(
  db: Db,
  redis: Redis,
  prefix: string,
  logger: Logger,
  ids: readonly string[],
): Promise<{ replayed: string[]; skipped: string[] }> {
  const result = await replayWebhookFailures(db, ids)
  const queue = createQueue<{ webhook_id: string }>('webhooks', {
    connection: redis,
    prefix,
    logger,
  })
  try {
    await enqueueWebhookDrain(queue, result.webhooks)
  } finally {
    await queue.close()
  }
  return { replayed: result.replayed, skipped: result.skipped }
}

/** `threadline webhooks failures [--app ID]` / `threadline webhooks replay ID…`. */
export async function webhooksCommand(
  config: Config,
  logger: Logger,
  args: string[],
  values: { app?: string },
): Promise<void> {
  const [action, ...rest] = args
  const appId = appOption(values.app, USAGE, false)
  if (action === 'replay' && (rest.length === 0 || !rest.every((id) => /^\d{1,19}$/.test(id)))) {
    throw new UsageError(USAGE)
  }
  if (action !== 'failures' && action !== 'replay') throw new UsageError(USAGE)
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    if (action === 'failures') {
      for (const f of await webhookFailures(db, appId)) out(JSON.stringify(f))
      return
    }
    const redis = createRedis(config, 'producer', 'cli')
    try {
      await reachRedis(redis, config)
      out(JSON.stringify(await replayWebhooks(db, redis, config.REDIS_PREFIX, logger, rest)))
    } finally {
      await closeRedis(redis)
    }
  } finally {
    await db.destroy()
  }
}
