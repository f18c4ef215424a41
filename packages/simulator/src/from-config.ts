import type { Config } from '@threadline/config'
import type { Logger } from '@threadline/logger'
import { createSimulator, type Simulator } from './simulator.js'

/** Builds a simulator from configuration (SIMULATOR_* variables). */
export function simulatorFromConfig(config: Config, logger: Logger): Simulator {
  return createSimulator({
    host: config.SIMULATOR_HOST,
    port: config.SIMULATOR_PORT,
    seed: config.SIMULATOR_SEED,
    rate: config.SIMULATOR_RATE,
    bearerToken: config.SIMULATOR_BEARER_TOKEN,
    keepAliveMs: config.SIMULATOR_KEEPALIVE_MS,
    maxStreamConnections: config.SIMULATOR_MAX_STREAM_CONNECTIONS,
    rateLimit: config.SIMULATOR_RATE_LIMIT,
    world: {
      users: config.SIMULATOR_USERS,
      historyPosts: config.SIMULATOR_HISTORY_POSTS,
      historyDays: config.SIMULATOR_HISTORY_DAYS,
      maxPosts: config.SIMULATOR_MAX_POSTS,
    },
    logger,
  })
}
