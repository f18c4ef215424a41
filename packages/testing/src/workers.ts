import { createDb } from '@threadline/db'
import { createRedis } from '@threadline/redis'
import type { TestEnv } from './env.js'

/**
 * The clients a worker service (the writer, delivery) is given and closes, over a test file's
 * schema: Postgres, and a worker connection to Redis named `name`.
 */
export function workerClients(
  env: TestEnv,
  name: string,
  {
    redisUrl = env.redisUrl,
    applicationName,
  }: { redisUrl?: string; applicationName?: string } = {},
) {
  return {
    db: createDb({ url: env.databaseUrl, poolMax: 4, applicationName }),
    redis: createRedis(redisUrl, 'worker', name),
    logger: env.logger,
  }
}

/**
 * A worker's queue options in tests: one job at a time, locks that do not lapse during a test, a
 * stream kept as long as production keeps it by default, and a short shutdown.
 */
export const testWorkerOptions = {
  concurrency: 1,
  lockDuration: 30_000,
  stalledInterval: 30_000,
  maxStalledCount: 1,
  streamRetentionMs: 600_000,
  shutdownTimeoutMs: 5_000,
}
