import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import {
  createWriter,
  withPartitionMaintenance,
  writerDepsFromConfig,
  writerOptionsFromConfig,
} from '@threadline/writer'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'writer' })
try {
  const metrics = createProcessMetrics(
    metricsDepsFromConfig(config, logger),
    metricsOptionsFromConfig(config, ['writer']),
  )
  const options = writerOptionsFromConfig(config)
  const deps = await writerDepsFromConfig(config, logger, metrics.metrics, options)
  const writer = withPartitionMaintenance(createWriter(deps, options), deps.db, config, logger)
  await runUntilSignal([metrics, writer], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'writer failed to start')
  process.exitCode = 1
}
