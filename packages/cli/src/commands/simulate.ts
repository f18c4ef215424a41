import type { Config } from '@threadline/config'
import type { Logger } from '@threadline/logger'
import { runUntilSignal } from '@threadline/runtime'
import {
  createSimulator,
  simulatorOptionsFromConfig,
  withSimulatorOverrides,
  type SimulatorOverrides,
} from '@threadline/simulator'

/** `threadline simulate`: the synthetic X upstream alone (SIMULATOR_* configuration). */
export async function simulate(
  config: Config,
  logger: Logger,
  overrides: SimulatorOverrides = {},
): Promise<void> {
  const simulator = createSimulator({
    ...withSimulatorOverrides(simulatorOptionsFromConfig(config), overrides),
    logger,
  })
  await runUntilSignal([simulator], logger, config.SHUTDOWN_TIMEOUT_MS)
  logger.info({ url: simulator.url, demo: simulator.demoConversations() }, 'simulator listening')
}
