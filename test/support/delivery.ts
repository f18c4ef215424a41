import { createDb } from '@threadline/db'
import { createDelivery, type Delivery, type DeliveryOptions } from '@threadline/delivery'
import { createRedis } from '@threadline/redis'
import type { TestEnv } from '@threadline/testing'

/**
 * The real delivery service for a test file's schema and prefix, tuned for tests: fast retries and
 * sweeps, webhooks on loopback allowed. Started, and closed with the file's environment.
 */
export async function startTestDelivery(
  env: TestEnv,
  options: Partial<DeliveryOptions> = {},
): Promise<Delivery> {
  const delivery = createDelivery(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 4 }),
      redis: createRedis(env.redisUrl, 'worker', 'test-delivery'),
      prefix: env.prefix,
      logger: env.logger,
    },
    {
      concurrency: 1,
      webhookConcurrency: 2,
      lockDuration: 30_000,
      stalledInterval: 30_000,
      maxStalledCount: 5,
      timeoutMs: 2_000,
      maxResponseBytes: 65_536,
      maxAttempts: 3,
      retryBaseMs: 50,
      crcIntervalMs: 3_600_000,
      crcMaxFailures: 3,
      sweepMs: 100,
      streamRetentionMs: 600_000,
      allowPrivate: true,
      shutdownTimeoutMs: 5_000,
      ...options,
    },
  )
  await delivery.start()
  env.defer(() => delivery.close())
  return delivery
}
