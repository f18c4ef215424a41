import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import type { DeliveryDeps } from './delivery.js'
import type { DeliveryOptions } from './options.js'

/** Webhooks one delivery process sends to at once (one request in flight per webhook). */
const WEBHOOK_CONCURRENCY = 32
/** BullMQ's job lock and stalled check, as the writer's: a killed process's jobs are retried. */
const LOCK_MS = 30_000
const STALLED_INTERVAL_MS = 30_000
const MAX_STALLED = 20
/** A webhook POST or CRC must complete within X's 10 s. */
const WEBHOOK_TIMEOUT_MS = 10_000
/** Response bytes read from a webhook; a longer answer fails the request. */
const WEBHOOK_RESPONSE_MAX_BYTES = 65_536
/** Tries per event before it is parked; retry n waits base × 3^(n-1): six tries over about an hour. */
const WEBHOOK_MAX_ATTEMPTS = 6
const WEBHOOK_RETRY_BASE_MS = 30_000
/** Periodic CRC re-check of every webhook, marking it invalid after this many failures in a row. */
const WEBHOOK_CRC_INTERVAL_MS = 1_800_000
const WEBHOOK_CRC_MAX_FAILURES = 3
/** How often to look for webhooks with events and no sender (recovery after a crash). */
const WEBHOOK_SWEEP_MS = 2_000

/**
 * The delivery service's options: what configuration sets, the constants above for the rest. The
 * activity stream keeps events as long as the `stored` stream keeps Posts.
 */
export function deliveryOptionsFromConfig(config: Config): DeliveryOptions {
  return {
    concurrency: config.DELIVERY_CONCURRENCY,
    webhookConcurrency: WEBHOOK_CONCURRENCY,
    lockDuration: LOCK_MS,
    stalledInterval: STALLED_INTERVAL_MS,
    maxStalledCount: MAX_STALLED,
    timeoutMs: WEBHOOK_TIMEOUT_MS,
    maxResponseBytes: WEBHOOK_RESPONSE_MAX_BYTES,
    maxAttempts: WEBHOOK_MAX_ATTEMPTS,
    retryBaseMs: WEBHOOK_RETRY_BASE_MS,
    crcIntervalMs: WEBHOOK_CRC_INTERVAL_MS,
    crcMaxFailures: WEBHOOK_CRC_MAX_FAILURES,
    sweepMs: WEBHOOK_SWEEP_MS,
    streamRetentionMs: config.STORED_STREAM_RETENTION_MS,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  }
}

/**
 * Opens the clients the delivery service owns (and closes): Postgres, refusing a schema that is
 * behind, and a worker connection to Redis. `metrics`: the process's registry, when it exports one.
 */
export async function deliveryDepsFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
): Promise<DeliveryDeps> {
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: config.DATABASE_POOL_MAX,
    applicationName: 'threadline-delivery',
    logger,
  })
  return {
    db,
    redis: createRedis(config, 'worker', 'delivery'),
    prefix: config.REDIS_PREFIX,
    logger,
    metrics: metrics?.delivery(),
  }
}
