import type { BackoffPolicy } from './backoff.js'
import type { RedisRoomOptions } from './redis-room.js'

/** How the leader learns of withdrawals (docs/configuration.md, UPSTREAM_COMPLIANCE). */
export interface ComplianceOptions {
  mode: 'stream' | 'jobs' | 'off'
  /** Between the starts of two sweeps (COMPLIANCE_INTERVAL_HOURS). */
  intervalMs: number
  /** Ids in one batch job (COMPLIANCE_JOB_MAX_IDS). */
  jobMaxIds: number
  /** The first wait between two polls of a job; it doubles up to `pollMaxMs`. */
  pollMs: number
  pollMaxMs: number
  /** A job not complete after this long is given up for this sweep (retried by the next). */
  jobTimeoutMs: number
}

/** What the ingest is told (ingestOptionsFromConfig makes it from configuration). */
export interface IngestOptions {
  upstreamUrl: string
  upstreamBearerToken?: string
  search: 'recent' | 'all'
  batchMaxItems: number
  batchMaxBytes?: number
  reconcileMs: number
  rulesDebounceMs: number
  stallMs: number
  /** `backfill_minutes` asked for after a gap that fits in it (0: never; longer gaps: search). */
  backfillMinutes: number
  /** The longest OR-combined search query of a window recovery (default 512). */
  queryMaxLength?: number
  noRulesRetryMs: number
  backoff: BackoffPolicy
  leaseMs: number
  backfillConcurrency: number
  backfillMaxWaitMs: number
  shutdownTimeoutMs: number
  /** Run the backfill worker in this process (default true). */
  backfillWorker?: boolean
  /** Take part in the leader election for rule sync and the stream (default true). */
  leader?: boolean
  backfillLockDuration?: number
  backfillStalledInterval?: number
  /** Compliance from the upstream; unset: off. */
  compliance?: ComplianceOptions
  /** When adding jobs pauses for a nearly full Redis (defaults in RedisRoom). */
  redisRoom?: RedisRoomOptions
}
