import { runCrc } from '@threadline/activity'
import { claimCrcChecks, dueWebhooks, pruneActivitySources, recordCrc } from '@threadline/db'
import { enqueueWebhookDrain } from '@threadline/queue'
import type { DeliveryContext } from '../context.js'

/** Activity sources older than this are forgotten: a job repeated later would fire again. */
const SOURCE_KEEP_MS = 24 * 3_600_000

async function checkCrcs(ctx: DeliveryContext): Promise<void> {
  const { db, log, options } = ctx
  const due = await claimCrcChecks(db, options.crcIntervalMs, 20)
  await Promise.all(
    due.map(async (hook) => {
      const result = await runCrc(hook.url, hook.consumer_secret, ctx.outbound)
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

/**
 * The periodic sweep: wakes idle webhooks with queued events (recovery after a crash), runs due
 * CRC re-checks, and now and then prunes old activity sources.
 */
export function sweepJob(ctx: DeliveryContext): () => Promise<void> {
  let sweeps = 0
  return async () => {
    sweeps += 1
    await enqueueWebhookDrain(ctx.webhooksQueue, await dueWebhooks(ctx.db, 500))
    await checkCrcs(ctx)
    if (sweeps % 100 === 1) await pruneActivitySources(ctx.db, SOURCE_KEEP_MS)
  }
}
