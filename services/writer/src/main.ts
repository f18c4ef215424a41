import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { runUntilSignal } from '@threadline/runtime'
import { writerFromConfig } from './from-config.js'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'writer' })
try {
  const writer = await writerFromConfig(config, logger)
  await runUntilSignal([writer], logger, config.SHUTDOWN_TIMEOUT_MS)
} catch (err) {
  logger.fatal({ err }, 'writer failed to start')
  process.exitCode = 1
}
