import type { Config } from '@threadline/config'
import type { Logger } from '@threadline/logger'
import { runUntilSignal } from '@threadline/runtime'
import { simulatorFromConfig, type SimulatorTuning } from '@threadline/simulator'

/** `threadline simulate`: the synthetic X upstream alone (SIMULATOR_* configuration). */
export async function simulate(
  config: Config,
  logger: Logger,
  tuning?: SimulatorTuning,
): Promise<void> {
  const simulator = simulatorFromConfig(config, logger, tuning)
  await runUntilSignal([simulator], logger, config.SHUTDOWN_TIMEOUT_MS)
  logger.info({ url: simulator.url, demo: simulator.demoConversations() }, 'simulator listening')
}
