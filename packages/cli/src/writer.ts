import type { Config } from '@threadline/config'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import {
  createWriter,
  withPartitionMaintenance,
  writerDepsFromConfig,
  writerOptionsFromConfig,
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
  const deps = await writerDepsFromConfig(config, logger, metrics, options)
  return withPartitionMaintenance(createWriter(deps, options), deps.db, config, logger)
}
