import { loadConfig } from '@threadline/config'
import { createLogger } from '@threadline/logger'
import { runUntilSignal } from '@threadline/runtime'
import { createSimulator, simulatorOptionsFromConfig } from '@threadline/simulator'

const config = loadConfig()
const logger = createLogger({ level: config.LOG_LEVEL, name: 'simulator' })
try {
  const simulator = createSimulator({ ...simulatorOptionsFromConfig(config), logger })
  await runUntilSignal([simulator], logger, config.SHUTDOWN_TIMEOUT_MS)
  logger.info({ demo_conversations: simulator.demoConversations() }, 'demo conversations')
} catch (err) {
  logger.fatal({ err }, 'simulator failed to start')
  process.exitCode = 1
}
