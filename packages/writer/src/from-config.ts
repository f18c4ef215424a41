import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import type { WriterDeps, WriterOptions } from './writer.js'

/**
 * BullMQ's job lock: a killed writer's batch is retried once its lock lapses. Long enough that a
 * busy event loop renews it in time; stalled batches are looked for as often.
 */
const LOCK_MS = 30_000
const STALLED_INTERVAL_MS = 30_000
/** A batch that keeps killing its writer is failed (and kept) rather than retried for ever. */
const MAX_STALLED = 20
/** How often to delete `posts` payloads whose job never came (an add that died half way). */
const PAYLOAD_SWEEP_MS = 600_000

/** The writer's options: what configuration sets, and the constants above for the rest. */
export function writerOptionsFromConfig(config: Config): WriterOptions {
  return {
    prefix: config.REDIS_PREFIX,
    concurrency: config.WRITER_CONCURRENCY,
    lockDuration: LOCK_MS,
    stalledInterval: STALLED_INTERVAL_MS,
    maxStalledCount: MAX_STALLED,
    streamRetentionMs: config.STORED_STREAM_RETENTION_MS,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    payloadSweepMs: PAYLOAD_SWEEP_MS,
  }
}

/** Postgres connections a writer needs: one per job in hand, and the relay's and the sweep's. */
function writerPoolSize(options: WriterOptions): number {
  return Math.max(options.concurrency + 2, 4)
}

/**
 * The clients a writer owns, opened from configuration, its pool sized for `options`; refuses a
 * schema that is behind. `metrics`: the process's registry, when it exports one.
 */
export async function writerDepsFromConfig(
  config: Config,
  logger: Logger,
  metrics: Metrics | undefined,
  options: WriterOptions,
): Promise<WriterDeps> {
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: writerPoolSize(options),
    applicationName: 'threadline-writer',
    logger,
  })
  return { db, redis: createRedis(config, 'worker', 'writer'), logger, metrics: metrics?.writer() }
}
