import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import { runUntilSignal } from '@threadline/runtime'
import {
  createDelivery,
  deliveryDepsFromConfig,
  deliveryOptionsFromConfig,
} from '@threadline/delivery'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'delivery' })
try {
  const metrics = createProcessMetrics(
    metricsDepsFromConfig(config, logger),
    metricsOptionsFromConfig(config, ['delivery']),
  )
  const delivery = createDelivery(
    await deliveryDepsFromConfig(config, logger, metrics.metrics),
    deliveryOptionsFromConfig(config),
  )
  await runUntilSignal([metrics, delivery], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'delivery failed to start')
  process.exitCode = 1
}
