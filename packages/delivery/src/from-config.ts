import type { Config } from '@threadline/config'
import { assertSchemaCurrent, createDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { createDelivery, type Delivery, type DeliveryOptions } from './delivery.js'

export function deliveryOptionsFromConfig(config: Config): DeliveryOptions {
  return {
    concurrency: config.DELIVERY_CONCURRENCY,
    webhookConcurrency: config.WEBHOOK_CONCURRENCY,
    lockDuration: config.WRITER_LOCK_MS,
    stalledInterval: config.WRITER_STALLED_INTERVAL_MS,
    maxStalledCount: config.WRITER_MAX_STALLED,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    maxResponseBytes: config.WEBHOOK_RESPONSE_MAX_BYTES,
    maxAttempts: config.WEBHOOK_MAX_ATTEMPTS,
    retryBaseMs: config.WEBHOOK_RETRY_BASE_MS,
    crcIntervalMs: config.WEBHOOK_CRC_INTERVAL_MS,
    crcMaxFailures: config.WEBHOOK_CRC_MAX_FAILURES,
    sweepMs: config.WEBHOOK_SWEEP_MS,
    streamRetentionMs: config.ACTIVITY_STREAM_RETENTION_MS,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  }
}

/**
 * Builds the delivery service and the clients it owns. Refuses a schema that is behind.
 * `metrics`: the process's registry, when it exports one.
 */
export async function deliveryFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
): Promise<Delivery> {
  const db = createDb({
    url: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    applicationName: 'threadline-delivery',
    logger,
  })
  try {
    await assertSchemaCurrent(db)
  } catch (err) {
    await db.destroy()
    throw err
  }
  return createDelivery({
    db,
    redis: createRedis(config, 'worker', 'delivery'),
    prefix: config.QUEUE_PREFIX,
    logger,
    metrics: metrics?.delivery(),
    options: deliveryOptionsFromConfig(config),
  })
}
