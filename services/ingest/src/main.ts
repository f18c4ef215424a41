import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { metricsFromConfig } from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import { ingestFromConfig } from '@threadline/ingest'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'ingest' })
try {
  const metrics = metricsFromConfig(config, logger, ['ingest'])
  const ingest = await ingestFromConfig(config, logger, {}, metrics.metrics)
  await runUntilSignal([metrics, ingest], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'ingest failed to start')
  process.exitCode = 1
}
