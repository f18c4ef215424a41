import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { metricsFromConfig } from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import { writerFromConfig } from '@threadline/writer'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'writer' })
try {
  const metrics = metricsFromConfig(config, logger, ['writer'])
  const writer = await writerFromConfig(config, logger, metrics.metrics)
  await runUntilSignal([metrics, writer], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'writer failed to start')
  process.exitCode = 1
}
