import { isIP } from 'node:net'
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

/** `10.0.0.0/8,192.168.1.7`: addresses or CIDR ranges → a list; unset or empty → none. */
const addressRanges = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    if (value === undefined || value === '') return []
    const ranges = value.split(',').map((p) => p.trim())
    for (const range of ranges) {
      const [address = '', bits, extra] = range.split('/')
      const family = isIP(address)
      const max = family === 6 ? 128 : 32
      if (!family || extra !== undefined || (bits !== undefined && !isPrefix(bits, max))) {
        ctx.addIssue({
          code: 'custom',
          message: `expected addresses or CIDR ranges (10.0.0.0/8,::1), got "${range}"`,
        })
        return z.NEVER
      }
    }
    return ranges
  })

function isPrefix(bits: string, max: number): boolean {
  return /^\d{1,3}$/.test(bits) && Number(bits) <= max
}

/** `lookup:3500,search:450`: requests per token per endpoint group per 15 minutes. */
const RATE_LIMIT_GROUPS = ['lookup', 'search', 'counts', 'rules'] as const
type RateLimits = Record<(typeof RATE_LIMIT_GROUPS)[number], number>
/** X's app-auth figures. */
const DEFAULT_RATE_LIMITS: RateLimits = { lookup: 3_500, search: 450, counts: 300, rules: 450 }

const rateLimits = z
  .string()
  .trim()
  .optional()
  .transform((value, ctx) => {
    const limits = { ...DEFAULT_RATE_LIMITS }
    if (value === undefined || value === '') return limits
    for (const part of value.split(',').map((p) => p.trim())) {
      const m = /^([a-z]+)[:=](\d{1,9})$/.exec(part)
      const group = m?.[1] as keyof RateLimits | undefined
      if (!m || !group || !RATE_LIMIT_GROUPS.includes(group) || Number(m[2]) < 1) {
        ctx.addIssue({
          code: 'custom',
          message: `expected ${RATE_LIMIT_GROUPS.map((g) => `${g}:N`).join(',')} (any of them), got "${part}"`,
        })
        return z.NEVER
      }
      limits[group] = Number(m[2])
    }
    return limits
  })

/**
 * Every environment variable Threadline reads: what an operator sets, grouped by the role that reads
 * it. Defaults work on a machine with Postgres and Redis on their standard local ports. Internal
 * timings and sizes are constants next to their use; tests pass them to the factories as options.
 */
export const envSchema = z.object({
  // --- every role: connections, logs, metrics, shutdown ---
  DATABASE_URL: url('postgres://postgres@127.0.0.1:5432/threadline', ['postgres:', 'postgresql:']),
  /** Postgres connections per process (the writer sizes its own pool from WRITER_CONCURRENCY). */
  DATABASE_POOL_MAX: int(10, 1, 500),
  REDIS_URL: url('redis://127.0.0.1:6379', ['redis:', 'rediss:']),
  /** Seeds of a Redis Cluster (`host:port,host:port`); set → cluster mode, REDIS_URL lends auth/TLS. */
  REDIS_CLUSTER_NODES: clusterNodes,
  /** Prefix of every Redis key Threadline writes (queues, streams, leases, rate limits). */
  REDIS_PREFIX: str('threadline'),
  LOG_LEVEL: z
    .enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
    .optional()
    .transform((v) => v ?? 'info'),
  /** Port of the process's Prometheus `/metrics`; 0 disables it and the queue sampling. */
  METRICS_PORT: int(9464, 0, 65535),
  /** Address `/metrics` listens on; 0.0.0.0 in containers so Prometheus can reach it. */
  METRICS_HOST: str('127.0.0.1'),
  /** Deadline of a graceful stop on SIGTERM/SIGINT. */
  SHUTDOWN_TIMEOUT_MS: int(15_000, 100, 600_000),

  // --- api ---
  HOST: str('127.0.0.1'),
  PORT: int(3000, 0, 65535),
  /** A streaming replica the API reads Posts from (lookup, search, counts); unset → DATABASE_URL. */
  DATABASE_READ_URL: url(undefined, ['postgres:', 'postgresql:']),
  /** The API's hot reads as named prepared statements; off behind a pooler that cannot keep them. */
  DATABASE_PREPARED_STATEMENTS: bool(true),
  /**
   * Signs pagination tokens so an altered one is refused; unset → the secret the first migrate
   * generated and keeps in the database (rotated with `threadline secret rotate`).
   */
  API_TOKEN_SECRET: optionalStr,
  API_RATE_LIMITS: rateLimits,
  /**
   * Proxies or load balancers (addresses, CIDR ranges) whose `X-Forwarded-For` names the client:
   * the per-address budget of requests without a valid token then counts clients, not the proxy.
   */
  API_TRUSTED_PROXIES: addressRanges,
  /** Stream rules per app. */
  API_RULE_CAP: int(1_000, 1, 1_000_000),
  /** Open filtered-stream connections per app (X: 1). */
  API_STREAM_MAX_CONNECTIONS: int(1, 1, 10_000),
  /** Open conversation feeds per app, counted apart from the filtered stream. */
  API_CONVERSATION_STREAM_MAX_CONNECTIONS: int(5, 1, 10_000),
  /** Activity subscriptions per app. */
  ACTIVITY_SUBSCRIPTION_CAP: int(1_500, 1, 1_000_000),
  /** Webhooks per app. */
  WEBHOOK_CAP: int(10, 1, 10_000),

  // --- ingest ---
  /** Base URL of an X-compatible upstream, without `/2`; unset → the built-in simulator. */
  UPSTREAM_URL: url(undefined, ['http:', 'https:']),
  UPSTREAM_BEARER_TOKEN: optionalStr,
  /** Backfill through `search/recent` or `search/all`. */
  UPSTREAM_SEARCH: z
    .enum(['recent', 'all'])
    .optional()
    .transform((v) => v ?? 'recent'),
  /**
   * `backfill_minutes` asked for after a gap that fits in it (0: never ask; X grants 1–5 on some
   * plans and refuses it on others, which is then not asked again): longer gaps are searched.
   */
  INGEST_BACKFILL_MINUTES: int(5, 0, 5),
  /** The longest search query the upstream takes: rule values are OR-combined within it. */
  UPSTREAM_QUERY_MAX_LENGTH: int(512, 16, 4_096),
  /** Conversations backfilled at once (each pages through the upstream's search). */
  INGEST_BACKFILL_CONCURRENCY: int(2, 1, 64),
  /**
   * How the ingest leader learns what X withdraws (docs/configuration.md): its compliance streams
   * (`stream`, Enterprise access), a sweep of the store through batch compliance jobs (`jobs`), or
   * not at all (`off`).
   */
  UPSTREAM_COMPLIANCE: z
    .enum(['stream', 'jobs', 'off'])
    .optional()
    .transform((v) => v ?? 'jobs'),
  /** Hours between two sweeps of the store through batch compliance jobs (X asks within 24 h). */
  COMPLIANCE_INTERVAL_HOURS: int(12, 1, 23),
  /** Ids in one batch compliance job (X takes up to 5 M a job). */
  COMPLIANCE_JOB_MAX_IDS: int(100_000, 1, 5_000_000),

  // --- writer ---
  /** Batches one writer stores at once, each on its own Postgres connection. */
  WRITER_CONCURRENCY: int(4, 1, 64),
  /** How long the `stored` stream keeps entries (≥ 5 min, for `backfill_minutes`). */
  STORED_STREAM_RETENTION_MS: int(600_000, 300_000, 86_400_000),
  /** Days of Posts kept: older daily partitions are dropped whole. Unset: kept forever. */
  POSTS_RETENTION_DAYS: int(0, 1, 36_500),

  // --- delivery ---
  /** `activity` jobs one delivery process turns into events at once. */
  DELIVERY_CONCURRENCY: int(4, 1, 64),
  /** Let webhooks target loopback/private addresses and plain http (development only). */
  WEBHOOK_ALLOW_PRIVATE: bool(false),

  // --- simulator (a synthetic X upstream for the demo, tests and benchmarks) ---
  SIMULATOR_HOST: str('127.0.0.1'),
  SIMULATOR_PORT: int(3100, 0, 65535),
  /** New Posts per second (0: only on demand through POST /_sim/emit). */
  SIMULATOR_RATE: int(5, 0, 1_000_000),
  SIMULATOR_BEARER_TOKEN: str('simulator-token'),
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
