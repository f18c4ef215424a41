import {
  signature,
  SIGNATURE_HEADER,
  webhookRequest,
  WebhookRequestError,
} from '@threadline/activity'
import {
  claimWebhook,
  completeDeliveries,
  failDelivery,
  headDeliveries,
  parkWebhookEvents,
  releaseWebhook,
  renewWebhookLease,
  type ClaimedWebhook,
} from '@threadline/db'
import {
  enqueueWebhookDrain,
  webhooksJobSchema,
  type Job,
  type WebhooksJob,
} from '@threadline/queue'
import type { DeliveryContext } from '../context.js'

/** Retry n (1-based) waits base × 3^(n-1), ±10%: with the defaults 30 s, 90 s, … 40 min. */
export function retryDelay(attempts: number, baseMs: number): number {
  const ms = baseMs * 3 ** Math.max(0, attempts - 1)
  return Math.round(ms * (0.9 + Math.random() * 0.2))
}

type SendOutcome = 'drained' | 'backoff'

async function post(ctx: DeliveryContext, hook: ClaimedWebhook, body: string): Promise<void> {
  const res = await webhookRequest(hook.url, {
    ...ctx.outbound,
    method: 'POST',
    body,
    headers: { [SIGNATURE_HEADER]: signature(hook.consumer_secret, body) },
  })
  if (res.status < 200 || res.status >= 300) {
    throw new WebhookRequestError(`The webhook answered ${res.status}.`, 'network')
  }
}

/**
 * After a failed request: parks the webhook's queue when the webhook refused it or the event ran
 * out of tries ('drained'), else schedules a retry with backoff ('backoff').
 */
async function failed(
  ctx: DeliveryContext,
  hook: ClaimedWebhook,
  seq: string,
  err: unknown,
  seconds: number,
): Promise<SendOutcome> {
  const { db, log, metrics, options } = ctx
  const reason = err instanceof Error ? err.message : String(err)
  const refused = err instanceof WebhookRequestError && err.kind === 'refused'
  const attempts = await failDelivery(db, hook.id, seq)
  if (refused || attempts >= options.maxAttempts) {
    metrics?.webhookDelivery('parked', seconds)
    const n = await parkWebhookEvents(
      db,
      hook.id,
      refused ? reason : `gave up after ${attempts} attempts: ${reason}`,
    )
    metrics?.parked(n, refused ? 'refused' : 'gave-up')
    log.warn({ webhook: hook.id, parked: n, reason }, 'webhook events parked')
    return 'drained'
  }
  metrics?.webhookDelivery('retry', seconds)
  const delay = retryDelay(attempts, options.retryBaseMs)
  await releaseWebhook(db, hook.id, { retryAt: new Date(Date.now() + delay), error: reason })
  await enqueueWebhookDrain(ctx.webhooksQueue, [hook.id], Math.max(1, delay))
  log.info({ webhook: hook.id, attempts, delay, reason }, 'webhook delivery failed; will retry')
  return 'backoff'
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
async function sendQueued(
  ctx: DeliveryContext,
  hook: ClaimedWebhook,
  leasedAt: number,
): Promise<SendOutcome> {
  const { db, log, metrics, options, leaseMs } = ctx
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
        await post(ctx, hook, row.body)
        sent.push(row.seq)
        metrics?.webhookDelivery('delivered', (performance.now() - sentAt) / 1000)
      } catch (err) {
        // What was sent before this one leaves the queue first: a park takes all that is left.
        await dropSent()
        const outcome = await failed(ctx, hook, row.seq, err, (performance.now() - sentAt) / 1000)
        if (outcome === 'backoff') return 'backoff'
        break
      }
    }
  }
}

/**
 * The `webhooks` job: one sender per webhook (a lease in Postgres), its queued events in order,
 * until the queue is empty or a failure backs it off.
 */
export function sendWebhookJob(ctx: DeliveryContext) {
  const { db, log, leaseMs } = ctx
  return async (job: Job<WebhooksJob>): Promise<void> => {
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
        outcome = await sendQueued(ctx, hook, leasedAt)
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
}
