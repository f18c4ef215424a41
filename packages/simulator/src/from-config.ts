import type { Config } from '@threadline/config'
import type { SimulatorOptions } from './simulator.js'

/** The world's seed: the same seed gives the same users, conversations and Posts. */
const SEED = 42
/** A keep-alive on the stream after this long without a Post (X: 20 s). */
const KEEPALIVE_MS = 20_000
const MAX_STREAM_CONNECTIONS = 1
/** Requests per endpoint per 15 minutes before a 429. */
const RATE_LIMIT = 100_000
/** The world: users, the history backfills find, and how many Posts it remembers (bounds memory). */
const WORLD = { users: 2_000, historyPosts: 20_000, historyDays: 10, maxPosts: 200_000 }

/** Changes to the options configuration gives: the world's size, timings, limits (tests). */
export type SimulatorOverrides = Partial<Omit<SimulatorOptions, 'world'>> & {
  world?: SimulatorOptions['world']
}

/** The simulator's options from configuration (SIMULATOR_* variables) and the constants above. */
export function simulatorOptionsFromConfig(config: Config): SimulatorOptions {
  return {
    host: config.SIMULATOR_HOST,
    port: config.SIMULATOR_PORT,
    seed: SEED,
    rate: config.SIMULATOR_RATE,
    bearerToken: config.SIMULATOR_BEARER_TOKEN,
    keepAliveMs: KEEPALIVE_MS,
    maxStreamConnections: MAX_STREAM_CONNECTIONS,
    rateLimit: RATE_LIMIT,
    world: WORLD,
  }
}

/** `options` with `overrides` applied; the world is merged on its own. */
export function withSimulatorOverrides(
  options: SimulatorOptions,
  overrides: SimulatorOverrides,
): SimulatorOptions {
  return { ...options, ...overrides, world: { ...options.world, ...overrides.world } }
}
