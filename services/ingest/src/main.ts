import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import { createIngest, ingestDepsFromConfig, ingestOptionsFromConfig } from '@threadline/ingest'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'ingest' })
try {
  const metrics = createProcessMetrics(
    metricsDepsFromConfig(config, logger),
    metricsOptionsFromConfig(config, ['ingest']),
  )
  const options = ingestOptionsFromConfig(config)
  const ingest = createIngest(await ingestDepsFromConfig(config, logger, metrics.metrics), options)
  await runUntilSignal([metrics, ingest], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'ingest failed to start')
  process.exitCode = 1
}
