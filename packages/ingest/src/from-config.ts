import { lookup } from 'node:dns/promises'
import type { Config } from '@threadline/config'
import { openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { POSTS_BATCH_MAX_BYTES, POSTS_BATCH_MAX_LINES } from '@threadline/queue'
import { createRedis } from '@threadline/redis'
import { X_BACKOFF } from './backoff.js'
import type { IngestDeps } from './ingest.js'
import type { ComplianceOptions, IngestOptions } from './options.js'

export class MissingUpstreamError extends Error {
  override name = 'MissingUpstreamError'
  constructor() {
    super(
      'UPSTREAM_URL is not set: give the ingest an upstream (or run the simulator and pass its URL)',
    )
  }
}

/** Full rule reconcile against the upstream's rule list, besides LISTEN (repairs drift). */
const RECONCILE_MS = 60_000
/** Coalesces a burst of rule changes into one upstream call. */
const RULES_DEBOUNCE_MS = 200
/** No byte for this long (X sends a keep-alive every 20 s) → reconnect. */
const STALL_MS = 30_000
/** After a 409 (no rules upstream), how often to look again when no rule change arrives. */
const NO_RULES_RETRY_MS = 5_000
/** The leader lease that gives one replica the stream connection; renewed every third of it. */
const LEASE_MS = 15_000
/** The longest single wait on upstream rate limits inside a backfill job. */
const BACKFILL_MAX_WAIT_MS = 900_000
/** A batch job is polled first after this long, then at doubling intervals up to the next. */
const COMPLIANCE_POLL_MS = 1_000
const COMPLIANCE_POLL_MAX_MS = 30_000
/** X completes most jobs within minutes; one still running after this is retried next sweep. */
const COMPLIANCE_JOB_TIMEOUT_MS = 2 * 3_600_000

/** Compliance from the upstream: UPSTREAM_COMPLIANCE and the COMPLIANCE_* settings. */
export function complianceOptionsFromConfig(config: Config): ComplianceOptions {
  return {
    mode: config.UPSTREAM_COMPLIANCE,
    intervalMs: config.COMPLIANCE_INTERVAL_HOURS * 3_600_000,
    jobMaxIds: config.COMPLIANCE_JOB_MAX_IDS,
    pollMs: COMPLIANCE_POLL_MS,
    pollMaxMs: COMPLIANCE_POLL_MAX_MS,
    jobTimeoutMs: COMPLIANCE_JOB_TIMEOUT_MS,
  }
}

/**
 * The ingest's options: what configuration sets and the constants above for the rest. The
 * upstream is UPSTREAM_URL (`threadline start` sets it to the built-in simulator's when unset).
 */
export function ingestOptionsFromConfig(config: Config): IngestOptions {
  if (!config.UPSTREAM_URL) throw new MissingUpstreamError()
  return {
    upstreamUrl: config.UPSTREAM_URL,
    upstreamBearerToken: config.UPSTREAM_BEARER_TOKEN,
    search: config.UPSTREAM_SEARCH,
    batchMaxItems: POSTS_BATCH_MAX_LINES,
    batchMaxBytes: POSTS_BATCH_MAX_BYTES,
    reconcileMs: RECONCILE_MS,
    rulesDebounceMs: RULES_DEBOUNCE_MS,
    stallMs: STALL_MS,
    backfillMinutes: config.INGEST_BACKFILL_MINUTES,
    queryMaxLength: config.UPSTREAM_QUERY_MAX_LENGTH,
    noRulesRetryMs: NO_RULES_RETRY_MS,
    backoff: X_BACKOFF,
    leaseMs: LEASE_MS,
    backfillConcurrency: config.INGEST_BACKFILL_CONCURRENCY,
    backfillMaxWaitMs: BACKFILL_MAX_WAIT_MS,
    shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS,
    compliance: complianceOptionsFromConfig(config),
  }
}

/**
 * The clients an ingest owns, opened from configuration; refuses a schema that is behind.
 * `metrics`: the process's registry, when it exports one.
 */
export async function ingestDepsFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
): Promise<IngestDeps> {
  if (config.UPSTREAM_URL) void warnIfUnresolvable(config.UPSTREAM_URL, logger)
  const db = await openServiceDb({
    url: config.DATABASE_URL,
    poolMax: Math.max(config.INGEST_BACKFILL_CONCURRENCY + 3, 4),
    applicationName: 'threadline-ingest',
    logger,
  })
  return {
    db,
    databaseUrl: config.DATABASE_URL,
    redis: createRedis(config, 'producer', 'ingest'),
    workerRedis: createRedis(config, 'worker', 'ingest-backfill'),
    prefix: config.REDIS_PREFIX,
    logger,
    metrics: metrics?.ingest(),
  }
}

/**
 * Says what is missing when the upstream's host name does not resolve, the usual first-run mistake
 * (`docker compose up` without the simulator profile and without UPSTREAM_URL): the ingest itself
 * keeps retrying, as it must for an upstream that is only away.
 */
async function warnIfUnresolvable(upstreamUrl: string, logger: Logger): Promise<void> {
  const host = new URL(upstreamUrl).hostname
  try {
    await lookup(host)
  } catch (err) {
    logger.error(
      { upstream: upstreamUrl, err },
      `the upstream's host ${host} does not resolve: start the simulator ` +
        '(docker compose --profile simulator up) or set UPSTREAM_URL to an X-compatible API',
    )
  }
}
