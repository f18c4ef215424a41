import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { withPartitionMaintenance } from './partition-maintenance.js'
import { createWriter, type Writer, type WriterOptions } from './writer.js'

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

/**
 * The writer's options: what configuration sets, the constants above for the rest, and `tuning`
 * (tests shorten timings through it).
 */
export function writerOptions(config: Config, tuning: Partial<WriterOptions> = {}): WriterOptions {
  return {
    concurrency: config.WRITER_CONCURRENCY,
    lockDuration: LOCK_MS,
    stalledInterval: STALLED_INTERVAL_MS,
    maxStalledCount: MAX_STALLED,
    streamRetentionMs: config.STORED_STREAM_RETENTION_MS,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    payloadSweepMs: PAYLOAD_SWEEP_MS,
    ...tuning,
  }
}

/**
 * Builds a writer and the clients it owns from configuration. Refuses a schema that is behind.
 * `metrics`: the process's registry, when it exports one.
 */
export async function writerFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
  tuning?: Partial<WriterOptions>,
): Promise<Writer> {
  const options = writerOptions(config, tuning)
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: Math.max(options.concurrency + 2, 4),
    applicationName: 'threadline-writer',
    logger,
  })
  const writer = createWriter({
    db,
    redis: createRedis(config, 'worker', 'writer'),
    prefix: config.REDIS_PREFIX,
    logger,
    metrics: metrics?.writer(),
    options,
  })
  return withPartitionMaintenance(writer, db, config, logger)
}
