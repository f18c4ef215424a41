import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import {
  createWriter,
  writerOptionsFromConfig,
  withPartitionMaintenance,
  writerPoolSize,
  type Writer,
  type WriterOptions,
} from '@threadline/writer'

/**
 * A writer on clients of its own, as services/writer does: `threadline start` runs it as a role,
 * `threadline import` when no writer consumes the queue. Refuses a schema that is behind.
 * `overrides`: timings tests shorten.
 */
export async function composeWriter(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
  overrides: Partial<WriterOptions> = {},
): Promise<Writer> {
  const options = { ...writerOptionsFromConfig(config), ...overrides }
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: writerPoolSize(options),
    applicationName: 'threadline-writer',
    logger,
  })
  const redis = createRedis(config, 'worker', 'writer')
  const writer = createWriter({ db, redis, logger, metrics: metrics?.writer() }, options)
  return withPartitionMaintenance(writer, db, config, logger)
}
