import { createDb } from '@threadline/db'
import { createRedis } from '@threadline/queue'
import type { TestEnv } from '@threadline/testing'
import { createWriter, type Writer, type WriterOptions } from '@threadline/writer'

/**
 * The real writer on its own clients, for a test file's schema and prefix; started, and closed
 * with the file's environment. Options default to production's, with a short shutdown.
 */
export async function startTestWriter(
  env: TestEnv,
  {
    redisUrl = env.redisUrl,
    options = {},
  }: { redisUrl?: string; options?: Partial<WriterOptions> } = {},
): Promise<Writer> {
  const writer = createWriter({
    db: createDb({ url: env.databaseUrl, poolMax: 4, applicationName: `${env.schema}-writer` }),
    redis: createRedis(redisUrl, 'worker', 'test-writer'),
    prefix: env.prefix,
    logger: env.logger,
    options: {
      concurrency: 2,
      lockDuration: 30_000,
      stalledInterval: 30_000,
      maxStalledCount: 20,
      streamRetentionMs: 600_000,
      shutdownTimeoutMs: 5_000,
      ...options,
    },
  })
  env.defer(() => writer.close())
  await writer.start()
  return writer
}
