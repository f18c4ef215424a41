import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { DeliveryMetrics } from '@threadline/metrics'
import { createQueue, createWorker, type ActivityJob, type WebhooksJob } from '@threadline/queue'
import { closeRedis, type Redis } from '@threadline/redis'
import { once, repeatEvery, withDeadline, type Repeating, type Service } from '@threadline/runtime'
import type { DeliveryContext } from './context.js'
import { deriveActivityJob, type DeriveActivityResult } from './jobs/derive-activity.js'
import { sendWebhookJob } from './jobs/send-webhook.js'
import { sweepJob } from './jobs/sweep.js'
import type { DeliveryOptions } from './options.js'

export interface DeliveryDeps {
  db: Db
  /** A worker connection (maxRetriesPerRequest: null); delivery closes it. */
  redis: Redis
  prefix: string
  logger: Logger
  /** Counts events, webhook deliveries and parked events when given. */
  metrics?: DeliveryMetrics
}

export interface Delivery extends Service {
  /** Wakes webhooks with queued events and runs due CRC checks now (the timer does it too). */
  sweep(): Promise<void>
}

/**
 * The delivery service (docs/architecture.md §1, step 7): `activity` jobs become events (matched
 * against the subscriptions, deduplicated in Postgres), which go to open activity streams through a
 * Redis Stream every API instance reads, and to webhooks through per-webhook ordered queues in
 * Postgres drained by `webhooks` jobs, one sender per webhook at a time. The jobs are in `jobs/`;
 * this wires them to their workers and the sweep timer.
 */
export function createDelivery(deps: DeliveryDeps, options: DeliveryOptions): Delivery {
  const { db, redis, prefix } = deps
  const log = deps.logger.child({ component: 'delivery' })
  const queueDeps = { connection: redis, prefix, logger: deps.logger }
  const ctx: DeliveryContext = {
    db,
    redis,
    prefix,
    log,
    metrics: deps.metrics,
    options,
    webhooksQueue: createQueue<WebhooksJob>('webhooks', queueDeps),
    outbound: {
      allowPrivate: options.allowPrivate,
      timeoutMs: options.timeoutMs,
      maxResponseBytes: options.maxResponseBytes,
      lookup: options.lookup,
    },
    leaseMs: options.leaseMs ?? Math.max(30_000, options.timeoutMs * 3),
  }
  const workerOptions = {
    lockDuration: options.lockDuration,
    stalledInterval: options.stalledInterval,
    maxStalledCount: options.maxStalledCount,
  }
  const activityWorker = createWorker<ActivityJob, DeriveActivityResult>(
    'activity',
    deriveActivityJob(ctx),
    queueDeps,
    { ...workerOptions, concurrency: options.concurrency },
  )
  const webhooksWorker = createWorker<WebhooksJob, void>(
    'webhooks',
    sendWebhookJob(ctx),
    queueDeps,
    {
      ...workerOptions,
      concurrency: options.webhookConcurrency,
    },
  )
  activityWorker.on('failed', (job, err) =>
    log.warn(
      { err, jobId: job?.id, attempts: job?.attemptsMade },
      'activity job failed; will retry',
    ),
  )
  webhooksWorker.on('failed', (job, err) =>
    log.warn({ err, jobId: job?.id }, 'webhook drain failed; will retry'),
  )
  const workers = [
    ['activity', activityWorker],
    ['webhooks', webhooksWorker],
  ] as const
  const sweep = sweepJob(ctx)
  let sweeping: Repeating | undefined

  return {
    sweep,
    async start() {
      for (const [name, w] of workers) {
        void w.run().catch((err: unknown) => log.error({ err }, `${name} worker stopped`))
      }
      await Promise.all(workers.map(([, w]) => w.waitUntilReady()))
      sweeping = repeatEvery(options.sweepMs, sweep, (err) =>
        log.warn({ err }, 'delivery sweep failed'),
      )
      log.info(
        { concurrency: options.concurrency, webhooks: options.webhookConcurrency },
        'delivery started',
      )
    },
    close: once(async () => {
      sweeping?.stop()
      for (const [, w] of workers) {
        try {
          await withDeadline(options.shutdownTimeoutMs, 'worker.close', () => w.close())
        } catch (err) {
          log.warn({ err }, 'closing a worker timed out; forcing')
          await w.close(true)
        }
      }
      await ctx.webhooksQueue.close()
      await closeRedis(redis)
      await db.destroy()
      log.info('delivery closed')
    }),
  }
}
