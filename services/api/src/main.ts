import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import { apiDepsFromConfig, apiOptionsFromConfig, createApi } from '@threadline/api'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'api' })
try {
  const metrics = createProcessMetrics(
    metricsDepsFromConfig(config, logger),
    metricsOptionsFromConfig(config, ['api']),
  )
  const api = createApi(
    await apiDepsFromConfig(config, logger, metrics.metrics),
    apiOptionsFromConfig(config),
  )
  await runUntilSignal([metrics, api], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'api failed to start')
  process.exitCode = 1
}
