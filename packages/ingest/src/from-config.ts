import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { createIngest, type Ingest, type IngestOptions } from './ingest.js'

export class MissingUpstreamError extends Error {
  override name = 'MissingUpstreamError'
  constructor() {
    super(
      'UPSTREAM_URL is not set: give the ingest an upstream (or run the simulator and pass its URL)',
    )
  }
}

/** The ingest's options as configuration gives them. */
export function ingestOptionsFromConfig(config: Config, upstreamUrl: string): IngestOptions {
  return {
    upstreamUrl,
    upstreamBearerToken: config.UPSTREAM_BEARER_TOKEN,
    search: config.UPSTREAM_SEARCH,
    batchMaxItems: config.BATCH_MAX_ITEMS,
    batchMaxMs: config.BATCH_MAX_MS,
    batchMaxBytes: config.BATCH_MAX_BYTES,
    reconcileMs: config.INGEST_RECONCILE_MS,
    rulesDebounceMs: config.INGEST_RULES_DEBOUNCE_MS,
    stallMs: config.INGEST_STALL_MS,
    backfillMinutes: config.INGEST_BACKFILL_MINUTES,
    noRulesRetryMs: config.INGEST_NO_RULES_RETRY_MS,
    backoff: {
      networkStepMs: config.INGEST_NETWORK_BACKOFF_STEP_MS,
      networkMaxMs: config.INGEST_NETWORK_BACKOFF_MAX_MS,
      httpMs: config.INGEST_HTTP_BACKOFF_MS,
      httpMaxMs: config.INGEST_HTTP_BACKOFF_MAX_MS,
      rateLimitMs: config.INGEST_RATE_LIMIT_BACKOFF_MS,
      rateLimitMaxMs: config.INGEST_RATE_LIMIT_BACKOFF_MAX_MS,
    },
    leaseMs: config.INGEST_LEASE_MS,
    backfillConcurrency: config.INGEST_BACKFILL_CONCURRENCY,
    backfillMaxWaitMs: config.INGEST_BACKFILL_MAX_WAIT_MS,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
  }
}

/**
 * Builds an ingest and the clients it owns from configuration. `upstreamUrl` overrides
 * UPSTREAM_URL (the CLI passes the built-in simulator's URL when UPSTREAM_URL is unset).
 * Refuses a schema that is behind. `metrics`: the process's registry, when it exports one.
 */
export async function ingestFromConfig(
  config: Config,
  logger: Logger,
  overrides: { upstreamUrl?: string; options?: Partial<IngestOptions> } = {},
  metrics?: Metrics,
): Promise<Ingest> {
  const upstreamUrl = overrides.upstreamUrl ?? config.UPSTREAM_URL
  if (!upstreamUrl) throw new MissingUpstreamError()
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: Math.max(config.INGEST_BACKFILL_CONCURRENCY + 3, 4),
    applicationName: 'threadline-ingest',
    logger,
  })
  return createIngest({
    db,
    databaseUrl: config.DATABASE_URL,
    redis: createRedis(config, 'producer', 'ingest'),
    workerRedis: createRedis(config, 'worker', 'ingest-backfill'),
    prefix: config.QUEUE_PREFIX,
    logger,
    metrics: metrics?.ingest(),
    options: { ...ingestOptionsFromConfig(config, upstreamUrl), ...overrides.options },
  })
}
