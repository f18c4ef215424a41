import { z } from 'zod'

/**
 * @NOTE z.coerce.boolean() turns "false" into true; this accepts only the words operators write.
 */
const bool = (fallback: boolean) =>
  z
    .string()
    .trim()
    .toLowerCase()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value === '') return fallback
      if (['true', '1', 'yes', 'on'].includes(value)) return true
      if (['false', '0', 'no', 'off'].includes(value)) return false
      ctx.addIssue({ code: 'custom', message: `expected true or false, got "${value}"` })
      return z.NEVER
    })

const int = (fallback: number, min: number, max: number) =>
  z
    .string()
    .trim()
    .optional()
    .transform((value, ctx) => {
      if (value === undefined || value === '') return fallback
      if (!/^-?\d+$/.test(value)) {
        ctx.addIssue({ code: 'custom', message: `expected a whole number, got "${value}"` })
        return z.NEVER
      }
      const n = Number(value)
      if (n < min || n > max) {
        ctx.addIssue({ code: 'custom', message: `expected ${min}..${max}, got ${value}` })
        return z.NEVER
      }
      return n
    })

const str = (fallback: string) =>
  z
    .string()
    .trim()
    .optional()
    .transform((v) => (v === undefined || v === '' ? fallback : v))

const optionalStr = z
  .string()
  .trim()
  .optional()
  .transform((v) => (v === undefined || v === '' ? undefined : v))

function url(fallback: string, protocols: string[]): z.ZodType<string, string | undefined>
function url(
  fallback: undefined,
  protocols: string[],
): z.ZodType<string | undefined, string | undefined>
function url(
  fallback: string | undefined,
  protocols: string[],
): z.ZodType<string | undefined, string | undefined> {
  return z
    .string()
    .trim()
    .optional()
    .transform((value, ctx) => {
      const v = value === undefined || value === '' ? fallback : value
      if (v === undefined) return undefined
      try {
        const parsed = new URL(v)
        if (!protocols.includes(parsed.protocol)) {
          ctx.addIssue({
            code: 'custom',
            message: `expected a ${protocols.join(' or ')} URL, got "${parsed.protocol}"`,
          })
          return z.NEVER
        }
      } catch {
        ctx.addIssue({ code: 'custom', message: 'is not a valid URL' })
        return z.NEVER
      }
      return v
    })
}

/** `host:port,host:port` → seeds; unset or empty → undefined (one Redis server, REDIS_URL). */
const clusterNodes = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined || value === '') return undefined
    const nodes: Array<{ host: string; port: number }> = []
    for (const part of value.split(',').map((p) => p.trim())) {
      const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):(\d{1,5})$/.exec(part)
      const port = m ? Number(m[2]) : NaN
      if (!m || port < 1 || port > 65535) {
        ctx.addIssue({ code: 'custom', message: `expected host:port[,host:port…], got "${part}"` })
        return z.NEVER
      }
      nodes.push({ host: m[1]!.replace(/^\[|\]$/g, ''), port })
    }
    return nodes
  })

/**
 * Every environment variable Threadline reads, with its default. Defaults work on a machine with
 * Postgres and Redis on their standard local ports. The README's configuration table mirrors this.
 */
export const envSchema = z.object({
  DATABASE_URL: url('postgres://postgres@127.0.0.1:5432/threadline', ['postgres:', 'postgresql:']),
  DATABASE_POOL_MAX: int(10, 1, 500),
  /** The API's hot reads as named prepared statements; off behind a pooler that cannot keep them. */
  DATABASE_PREPARED_STATEMENTS: bool(true),
  REDIS_URL: url('redis://127.0.0.1:6379', ['redis:', 'rediss:']),
  QUEUE_PREFIX: str('threadline'),
  HOST: str('127.0.0.1'),
  PORT: int(3000, 0, 65535),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .transform((v) => v ?? 'info'),
  UPSTREAM_URL: url(undefined, ['http:', 'https:']),
  UPSTREAM_BEARER_TOKEN: optionalStr,
  UPSTREAM_SEARCH: z
    .enum(['recent', 'all'])
    .optional()
    .transform((v) => v ?? 'recent'),
  WEBHOOK_ALLOW_PRIVATE: bool(false),
  // Batches in flight per writer: while some wait on Postgres (statement, commit) and Redis, the
  // writer normalizes others. On 2 cores, 2 left the box ≈ 15 % idle; 4 keeps it ≈ 93 % busy, and 8
  // (≈ 96 %) cost more CPU per stored row, writer and Postgres alike: ≈ 10 % in the median of seven
  // paired runs, up to 60 % (docs/performance-log.md).
  WRITER_CONCURRENCY: int(4, 1, 64),
  WRITER_LOCK_MS: int(30_000, 1_000, 600_000),
  WRITER_STALLED_INTERVAL_MS: int(30_000, 500, 600_000),
  WRITER_MAX_STALLED: int(20, 1, 1_000),
  BATCH_MAX_ITEMS: int(500, 1, 10_000),
  BATCH_MAX_MS: int(100, 1, 60_000),
  BATCH_MAX_BYTES: int(4 * 1024 * 1024, 1024, 256 * 1024 * 1024),
  STORED_STREAM_RETENTION_MS: int(600_000, 300_000, 86_400_000),
  /** How often writers delete `posts` payloads whose job never came (two passes apart). */
  PAYLOAD_SWEEP_MS: int(600_000, 10_000, 86_400_000),
  SHUTDOWN_TIMEOUT_MS: int(15_000, 100, 600_000),
  // --- ingest (packages/ingest): rule sync, stream reader, backfill, leader lease ---
  /** Full rule reconcile against the upstream's GET rules (repairs drift), besides LISTEN. */
  INGEST_RECONCILE_MS: int(60_000, 100, 3_600_000),
  /** Coalesces a burst of rule changes into one sync. */
  INGEST_RULES_DEBOUNCE_MS: int(200, 0, 60_000),
  /** No byte (not even a keep-alive) for this long → reconnect. X sends keep-alives every 20 s. */
  INGEST_STALL_MS: int(30_000, 100, 600_000),
  /** `backfill_minutes` asked for on reconnect (0: do not ask; X allows 1–5). */
  INGEST_BACKFILL_MINUTES: int(0, 0, 5),
  INGEST_NETWORK_BACKOFF_STEP_MS: int(250, 1, 60_000),
  INGEST_NETWORK_BACKOFF_MAX_MS: int(16_000, 1, 600_000),
  INGEST_HTTP_BACKOFF_MS: int(5_000, 1, 600_000),
  INGEST_HTTP_BACKOFF_MAX_MS: int(320_000, 1, 3_600_000),
  INGEST_RATE_LIMIT_BACKOFF_MS: int(60_000, 1, 3_600_000),
  INGEST_RATE_LIMIT_BACKOFF_MAX_MS: int(960_000, 1, 3_600_000),
  /** After a 409 (no rules upstream), how often to look again when no rule change arrives. */
  INGEST_NO_RULES_RETRY_MS: int(5_000, 10, 600_000),
  /** Leader lease (one stream connection across replicas); renewed every third of it. */
  INGEST_LEASE_MS: int(15_000, 300, 600_000),
  INGEST_BACKFILL_CONCURRENCY: int(2, 1, 64),
  /** The longest single wait on upstream rate limits inside a backfill job. */
  INGEST_BACKFILL_MAX_WAIT_MS: int(900_000, 1, 3_600_000),
  // --- read API (packages/api) ---
  API_POOL_MAX: int(10, 1, 500),
  /** Requests per token per endpoint per 15-minute window (X's app-auth figures by default). */
  API_RATE_LIMIT_LOOKUP: int(3_500, 1, 10_000_000),
  API_RATE_LIMIT_SEARCH: int(450, 1, 10_000_000),
  API_RATE_LIMIT_COUNTS: int(300, 1, 10_000_000),
  API_RATE_LIMIT_RULES: int(450, 1, 10_000_000),
  API_RULE_CAP: int(1_000, 1, 1_000_000),
  API_QUERY_MAX_LENGTH: int(1_024, 1, 4_096),
  API_BODY_LIMIT_BYTES: int(1_048_576, 1_024, 16_777_216),
  API_TOKEN_CACHE_MS: int(10_000, 0, 600_000),
  /** Signs pagination tokens so an altered one is refused; set it equal on every api replica. */
  API_TOKEN_SECRET: str('threadline-pagination'),
  // --- filtered stream (packages/api/src/stream): GET /2/tweets/search/stream ---
  /** A bare \r\n is sent after this long without traffic (X: 10 s; clients give up after ~20 s). */
  API_STREAM_KEEPALIVE_MS: int(10_000, 10, 60_000),
  /** Open filtered-stream connections per app (X: 1). */
  API_STREAM_MAX_CONNECTIONS: int(1, 1, 10_000),
  /** `cluster`: the connection limit is counted in Redis across api replicas; `instance`: per process. */
  API_STREAM_CONNECTION_SCOPE: z
    .enum(['cluster', 'instance'])
    .optional()
    .transform((v) => v ?? 'cluster'),
  /** Bytes queued for one client past which it is cut off as a SlowReader (bounds memory). */
  API_STREAM_MAX_BUFFER_BYTES: int(4 * 1024 * 1024, 1_024, 1_073_741_824),
  /** Entries per XREAD of the `stored` stream. */
  API_STREAM_READ_BATCH: int(500, 1, 10_000),
  // --- simulator (packages/simulator): a synthetic X upstream, its world in memory ---
  SIMULATOR_HOST: str('127.0.0.1'),
  SIMULATOR_PORT: int(3100, 0, 65535),
  SIMULATOR_SEED: int(42, 0, 2_147_483_647),
  /** New Posts per second (0: only on demand through POST /_sim/emit). */
  SIMULATOR_RATE: int(5, 0, 1_000_000),
  SIMULATOR_BEARER_TOKEN: str('simulator-token'),
  SIMULATOR_KEEPALIVE_MS: int(20_000, 10, 600_000),
  SIMULATOR_USERS: int(2_000, 1, 1_000_000),
  SIMULATOR_HISTORY_POSTS: int(20_000, 0, 5_000_000),
  SIMULATOR_HISTORY_DAYS: int(10, 1, 365),
  /** Older Posts are forgotten past this many, bounding memory in long runs. */
  SIMULATOR_MAX_POSTS: int(200_000, 1_000, 50_000_000),
  SIMULATOR_MAX_STREAM_CONNECTIONS: int(1, 1, 100),
  /** Requests per endpoint per 15 minutes before a 429. */
  SIMULATOR_RATE_LIMIT: int(100_000, 1, 100_000_000),
  // --- activity subscriptions, webhooks and delivery (packages/delivery) ---
  /** Subscriptions per app (api.md §4.2). */
  ACTIVITY_SUBSCRIPTION_CAP: int(1_500, 1, 1_000_000),
  /** Webhooks per app. */
  WEBHOOK_CAP: int(10, 1, 10_000),
  /** Open `/2/activity/stream` connections per app. */
  ACTIVITY_STREAM_MAX_CONNECTIONS: int(1, 1, 100),
  /** How long the activity event stream keeps events (≥ 5 min, for `backfill_minutes`). */
  ACTIVITY_STREAM_RETENTION_MS: int(600_000, 300_000, 86_400_000),
  /** `activity` jobs one delivery instance turns into events at once. */
  DELIVERY_CONCURRENCY: int(4, 1, 64),
  /** Webhooks one delivery instance sends to at once (one request in flight per webhook). */
  WEBHOOK_CONCURRENCY: int(32, 1, 1_024),
  /** A webhook POST or CRC must complete within this (X: 10 s). */
  WEBHOOK_TIMEOUT_MS: int(10_000, 10, 60_000),
  /** Response bytes read from a webhook; a longer answer fails the request. */
  WEBHOOK_RESPONSE_MAX_BYTES: int(65_536, 1_024, 10_485_760),
  /** Tries per event before it is parked in webhook_failures. */
  WEBHOOK_MAX_ATTEMPTS: int(6, 1, 100),
  /** Retry n waits base × 3^(n-1): 30 s … 40 min, six tries over about an hour by default. */
  WEBHOOK_RETRY_BASE_MS: int(30_000, 1, 3_600_000),
  /** Periodic CRC re-check of every webhook… */
  WEBHOOK_CRC_INTERVAL_MS: int(1_800_000, 100, 86_400_000),
  /** …marking it invalid after this many failures in a row. */
  WEBHOOK_CRC_MAX_FAILURES: int(3, 1, 100),
  /** How often delivery looks for webhooks with events and no sender (recovery after a crash). */
  WEBHOOK_SWEEP_MS: int(2_000, 10, 600_000),
  // --- observability (packages/metrics, issue 8): Prometheus /metrics of every process ---
  /** Port of the process's metrics server (GET /metrics); 0 disables it and the queue sampling. */
  METRICS_PORT: int(9464, 0, 65535),
  /** Address it listens on; 0.0.0.0 in containers so Prometheus can reach it. */
  METRICS_HOST: str('127.0.0.1'),
  /** How often queue depths and the oldest waiting job's age are read from BullMQ. */
  METRICS_QUEUE_SAMPLE_MS: int(5_000, 100, 600_000),
  // --- beyond one machine (issue 8): Redis Cluster, a Postgres read replica for the API ---
  /** Seeds of a Redis Cluster (`host:port,host:port`); set → cluster mode, REDIS_URL lends auth/TLS. */
  REDIS_CLUSTER_NODES: clusterNodes,
  /** A streaming replica the API reads Posts from (lookup, search, counts); unset → DATABASE_URL. */
  DATABASE_READ_URL: url(undefined, ['postgres:', 'postgresql:']),
  // --- the test suites ---
  /** X's OpenAPI document, which response-shape tests validate against; unset → found beside the checkout. */
  X_OPENAPI_PATH: optionalStr,
})

export type Config = z.output<typeof envSchema>

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n  ${problems.join('\n  ')}`)
    this.name = 'ConfigError'
  }
}

/** Parses the environment once; errors name each variable at fault. */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const result = envSchema.safeParse(env)
  if (result.success) return result.data
  throw new ConfigError(
    result.error.issues.map((issue) => `${issue.path.join('.')}: ${issue.message}`),
  )
}
