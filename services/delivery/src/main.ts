import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { runUntilSignal } from '@threadline/runtime'
import { deliveryFromConfig } from './from-config.js'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'delivery' })
try {
  const delivery = await deliveryFromConfig(config, logger)
  await runUntilSignal([delivery], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'delivery failed to start')
  process.exitCode = 1
}
