import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/queue'
import { createWriter, type Writer, type WriterOptions } from './writer.js'

/**
 * Builds a writer and the clients it owns from configuration. Refuses a schema that is behind.
 * `metrics`: the process's registry, when it exports one.
 */
export async function writerFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
): Promise<Writer> {
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: Math.max(config.WRITER_CONCURRENCY + 2, 4),
    applicationName: 'threadline-writer',
    logger,
  })
  return createWriter({
    db,
    redis: createRedis(config, 'worker', 'writer'),
    prefix: config.QUEUE_PREFIX,
    logger,
    metrics: metrics?.writer(),
    options: writerOptions(config),
  })
}

/** The writer's options from configuration (`loadConfig({})`: production's defaults). */
export function writerOptions(config: Config): WriterOptions {
  return {
    concurrency: config.WRITER_CONCURRENCY,
    lockDuration: config.WRITER_LOCK_MS,
    stalledInterval: config.WRITER_STALLED_INTERVAL_MS,
    maxStalledCount: config.WRITER_MAX_STALLED,
    streamRetentionMs: config.STORED_STREAM_RETENTION_MS,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    payloadSweepMs: config.PAYLOAD_SWEEP_MS,
  }
}
