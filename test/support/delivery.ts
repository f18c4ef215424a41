import { createDelivery, type Delivery, type DeliveryOptions } from '@threadline/delivery'
import { testWorkerOptions, workerClients, type TestEnv } from '@threadline/testing'

/**
 * The real delivery service for a test file's schema and prefix, tuned for tests: fast retries and
 * sweeps, webhooks on loopback allowed. Started, and closed with the file's environment.
 */
export async function startTestDelivery(
  env: TestEnv,
  options: Partial<DeliveryOptions> = {},
): Promise<Delivery> {
  const delivery = createDelivery(
    { ...workerClients(env, 'test-delivery'), prefix: env.prefix },
    {
      ...testWorkerOptions,
      webhookConcurrency: 2,
      maxStalledCount: 5,
      timeoutMs: 2_000,
      maxResponseBytes: 65_536,
      maxAttempts: 3,
      retryBaseMs: 50,
      crcIntervalMs: 3_600_000,
      crcMaxFailures: 3,
      sweepMs: 100,
      allowPrivate: true,
      ...options,
    },
  )
  await delivery.start()
  env.defer(() => delivery.close())
  return delivery
}
