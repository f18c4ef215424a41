import {
  deriveCandidates,
  matchEvents,
  runCrc,
  signature,
  SIGNATURE_HEADER,
  webhookRequest,
  WebhookRequestError,
  type ActivityEvent,
  type OutboundOptions,
} from '@threadline/activity'
import {
  activityPosts,
  candidateSubscriptions,
  claimActivitySources,
  claimCrcChecks,
  claimWebhook,
  completeDeliveries,
  dueWebhooks,
  failDelivery,
  headDeliveries,
  parkWebhookEvents,
  pruneActivitySources,
  queueWebhookEvents,
  recordCrc,
  releaseWebhook,
  renewWebhookLease,
  type ClaimedWebhook,
  type Db,
} from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { DeliveryMetrics } from '@threadline/metrics'
import {
  activityJobSchema,
  createQueue,
  createWorker,
  enqueueWebhookDrain,
  publishActivity,
  webhooksJobSchema,
  type ActivityJob,
  type Job,
  type WebhooksJob,
} from '@threadline/queue'
import { closeRedis, type Redis } from '@threadline/redis'
import { once, repeatEvery, withDeadline, type Repeating, type Service } from '@threadline/runtime'

export interface DeliveryOptions {
  /** `activity` jobs at once. */
  concurrency: number
  /** Webhooks sent to at once (each has at most one request in flight). */
  webhookConcurrency: number
  lockDuration: number
  stalledInterval: number
  maxStalledCount: number
  timeoutMs: number
  maxResponseBytes: number
  maxAttempts: number
  retryBaseMs: number
  crcIntervalMs: number
  crcMaxFailures: number
  sweepMs: number
  streamRetentionMs: number
  allowPrivate: boolean
  shutdownTimeoutMs: number
  /** A sender's hold on a webhook; renewed before each request. */
  leaseMs?: number
  /** Name resolution for webhook hosts (tests resolve a name to loopback). */
  lookup?: OutboundOptions['lookup']
}

export interface DeliveryDeps {
  db: Db
  /** A worker connection (maxRetriesPerRequest: null); delivery closes it. */
  redis: Redis
  prefix: string
  logger: Logger
  options: DeliveryOptions
  /** Counts events, webhook deliveries and parked events when given. */
  metrics?: DeliveryMetrics
}

export interface Delivery extends Service {
  /** Wakes webhooks with queued events and runs due CRC checks now (the timer does it too). */
  sweep(): Promise<void>
}

/** Retry n (1-based) waits base × 3^(n-1), ±10%: with the defaults 30 s, 90 s, … 40 min. */
export function retryDelay(attempts: number, baseMs: number): number {
  const ms = baseMs * 3 ** Math.max(0, attempts - 1)
  return Math.round(ms * (0.9 + Math.random() * 0.2))
}

/**
 * The delivery service (docs/architecture.md §1, step 7): `activity` jobs become events (matched
 * against the subscriptions, deduplicated in Postgres), which go to open activity streams through a
 * Redis Stream every API instance reads, and to webhooks through per-webhook ordered queues in
 * Postgres drained by `webhooks` jobs, one sender per webhook at a time.
 */
export function createDelivery(deps: DeliveryDeps): Delivery {
  const { db, redis, prefix, options, metrics } = deps
  const log = deps.logger.child({ component: 'delivery' })
  const leaseMs = options.leaseMs ?? Math.max(30_000, options.timeoutMs * 3)
  const queueDeps = { connection: redis, prefix, logger: deps.logger }
  const webhooksQueue = createQueue<WebhooksJob>('webhooks', queueDeps)
  const outbound = {
    allowPrivate: options.allowPrivate,
    timeoutMs: options.timeoutMs,
    maxResponseBytes: options.maxResponseBytes,
    lookup: options.lookup,
  }

  // --- activity: stored Posts and user changes → events ---
  const processActivity = async (job: Job<ActivityJob>): Promise<{ events: number }> => {
    const jobLog = log.child({ jobId: job.id })
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

  // --- webhooks: one sender per webhook, events in order ---
  type SendOutcome = 'drained' | 'backoff'

  const send = async (hook: ClaimedWebhook, body: string) => {
    const res = await webhookRequest(hook.url, {
      ...outbound,
      method: 'POST',
      body,
      headers: { [SIGNATURE_HEADER]: signature(hook.consumer_secret, body) },
    })
    if (res.status < 200 || res.status >= 300) {
      throw new WebhookRequestError(`The webhook answered ${res.status}.`, 'network')
    }
  }

  /**
   * Sends a claimed webhook's queue in order. The lease is renewed only once less than two
   * request timeouts of it are left (measured from before the statement that set it, so clock
   * offsets do not matter): every append for this webhook locks its row until commit, and an
   * UPDATE per event would wait behind each of them. Events sent are dropped from the queue a run
   * at a time (one statement for up to a read's 50), before the next read, a failure, a park or a
   * lost lease, as a transaction per event would cap a webhook's rate. A sender that dies in
   * between leaves those events to be sent again, with their event_uuid.
   */
  const sendQueued = async (hook: ClaimedWebhook, leasedAt: number): Promise<SendOutcome> => {
    let since = leasedAt
    const sent: string[] = []
    const dropSent = () => completeDeliveries(db, hook.id, sent.splice(0))
    for (;;) {
      await dropSent()
      const rows = await headDeliveries(db, hook.id, 50)
      if (rows.length === 0) return 'drained'
      if (!hook.valid) {
        const n = await parkWebhookEvents(db, hook.id, 'webhook invalid (CRC check failed)')
        metrics?.parked(n, 'invalid')
        log.warn({ webhook: hook.id, parked: n }, 'events parked: webhook invalid')
        return 'drained'
      }
      for (const row of rows) {
        if (performance.now() - since > leaseMs - 2 * options.timeoutMs) {
          const at = performance.now()
          if (!(await renewWebhookLease(db, hook.id, leaseMs))) {
            await dropSent()
            return 'drained'
          }
          since = at
        }
        const sentAt = performance.now()
        try {
          await send(hook, row.body)
          sent.push(row.seq)
          metrics?.webhookDelivery('delivered', (performance.now() - sentAt) / 1000)
        } catch (err) {
          const seconds = (performance.now() - sentAt) / 1000
          // What was sent before this one leaves the queue first: a park takes all that is left.
          await dropSent()
          const reason = err instanceof Error ? err.message : String(err)
          const refused = err instanceof WebhookRequestError && err.kind === 'refused'
          const attempts = await failDelivery(db, hook.id, row.seq)
          if (refused || attempts >= options.maxAttempts) {
            metrics?.webhookDelivery('parked', seconds)
            const n = await parkWebhookEvents(
              db,
              hook.id,
              refused ? reason : `gave up after ${attempts} attempts: ${reason}`,
            )
            metrics?.parked(n, refused ? 'refused' : 'gave-up')
            log.warn({ webhook: hook.id, parked: n, reason }, 'webhook events parked')
            break
          }
          metrics?.webhookDelivery('retry', seconds)
          const delay = retryDelay(attempts, options.retryBaseMs)
          await releaseWebhook(db, hook.id, {
            retryAt: new Date(Date.now() + delay),
            error: reason,
          })
          await enqueueWebhookDrain(webhooksQueue, [hook.id], Math.max(1, delay))
          log.info(
            { webhook: hook.id, attempts, delay, reason },
            'webhook delivery failed; will retry',
          )
          return 'backoff'
        }
      }
    }
  }

  const drain = async (job: Job<WebhooksJob>): Promise<void> => {
    const parsed = webhooksJobSchema.safeParse(job.data)
    if (!parsed.success) {
      log.warn({ jobId: job.id }, 'invalid webhooks job ignored')
      return
    }
    const id = parsed.data.webhook_id
    for (;;) {
      const leasedAt = performance.now()
      const hook = await claimWebhook(db, id, leaseMs)
      if (!hook) return // another sender has it, a backoff is pending, or it was deleted
      let outcome: SendOutcome
      try {
        outcome = await sendQueued(hook, leasedAt)
      } catch (err) {
        await releaseWebhook(db, id).catch(() => {})
        throw err
      }
      if (outcome === 'backoff') return
      await releaseWebhook(db, id)
      // An append that raced with our last empty read saw the lease taken; look once more.
      if ((await headDeliveries(db, id, 1)).length === 0) return
    }
  }

  const workerOptions = {
    lockDuration: options.lockDuration,
    stalledInterval: options.stalledInterval,
    maxStalledCount: options.maxStalledCount,
  }
  const activityWorker = createWorker<ActivityJob, { events: number }>(
    'activity',
    processActivity,
    queueDeps,
    { ...workerOptions, concurrency: options.concurrency },
  )
  const webhooksWorker = createWorker<WebhooksJob, void>('webhooks', drain, queueDeps, {
    ...workerOptions,
    concurrency: options.webhookConcurrency,
  })
  activityWorker.on('failed', (job, err) =>
    log.warn(
      { err, jobId: job?.id, attempts: job?.attemptsMade },
      'activity job failed; will retry',
    ),
  )
  webhooksWorker.on('failed', (job, err) =>
    log.warn({ err, jobId: job?.id }, 'webhook drain failed; will retry'),
  )

  // --- periodic: wake idle webhooks with queued events, CRC re-checks, pruning ---
  let sweeps = 0
  const checkCrcs = async () => {
    const due = await claimCrcChecks(db, options.crcIntervalMs, 20)
    await Promise.all(
      due.map(async (hook) => {
        const result = await runCrc(hook.url, hook.consumer_secret, outbound)
        const after = await recordCrc(db, hook.id, result.ok, {
          maxFailures: options.crcMaxFailures,
        })
        if (!result.ok) {
          log.warn(
            { webhook: hook.id, reason: result.reason, valid: after?.valid },
            'CRC re-check failed',
          )
        }
      }),
    )
  }
  const sweep = async () => {
    sweeps += 1
    await enqueueWebhookDrain(webhooksQueue, await dueWebhooks(db, 500))
    await checkCrcs()
    if (sweeps % 100 === 1) await pruneActivitySources(db, 24 * 3_600_000)
  }
  let sweeping: Repeating | undefined

  return {
    sweep,
    async start() {
      void activityWorker
        .run()
        .catch((err: unknown) => log.error({ err }, 'activity worker stopped'))
      void webhooksWorker
        .run()
        .catch((err: unknown) => log.error({ err }, 'webhooks worker stopped'))
      await Promise.all([activityWorker.waitUntilReady(), webhooksWorker.waitUntilReady()])
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
      for (const w of [activityWorker, webhooksWorker]) {
        try {
          await withDeadline(options.shutdownTimeoutMs, 'worker.close', () => w.close())
        } catch (err) {
          log.warn({ err }, 'closing a worker timed out; forcing')
          await w.close(true)
        }
      }
      await webhooksQueue.close()
      await closeRedis(redis)
      await db.destroy()
      log.info('delivery closed')
    }),
  }
}
