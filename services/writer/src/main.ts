import { loadConfig } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import { createLogger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { runUntilSignal } from '@threadline/runtime'
import {
  createWriter,
  withPartitionMaintenance,
  writerOptionsFromConfig,
  writerPoolSize,
} from '@threadline/writer'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'writer' })
try {
  const metrics = createProcessMetrics(
    metricsDepsFromConfig(config, logger),
    metricsOptionsFromConfig(config, ['writer']),
  )
  const options = writerOptionsFromConfig(config)
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: writerPoolSize(options),
    applicationName: 'threadline-writer',
    logger,
  })
  const writer = withPartitionMaintenance(
    createWriter(
      {
        db,
        redis: createRedis(config, 'worker', 'writer'),
        logger,
        metrics: metrics.metrics.writer(),
      },
      options,
    ),
    db,
    config,
    logger,
  )
  await runUntilSignal([metrics, writer], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'writer failed to start')
  process.exitCode = 1
}
