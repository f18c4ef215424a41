import type { Config } from '@threadline/config'
import { apiTokenSecrets, openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { DEFAULT_MAX_LENGTH } from '@threadline/query'
import { activityOptionsFromConfig } from './activity/options.js'
import type { ApiRoleDeps, ApiRoleOptions } from './api.js'
import { filteredStreamOptionsFromConfig } from './stream/from-config.js'

/** Every statement of the API gives up after this long: a hostile query costs bounded time. */
const STATEMENT_TIMEOUT_MS = 10_000
/** Request bodies past this are a 413 (X's figure). */
const BODY_LIMIT_BYTES = 1_048_576
/** How long a bearer token's lookup is reused, so a hot client costs no query per request. */
const TOKEN_CACHE_MS = 10_000

function withStatementTimeout(url: string): string {
  const u = new URL(url)
  const prior = u.searchParams.get('options')
  u.searchParams.set(
    'options',
    `${prior ? `${prior} ` : ''}-c statement_timeout=${STATEMENT_TIMEOUT_MS}`,
  )
  return u.toString()
}

/** The API role's options: what configuration sets, the constants above for the rest. */
export function apiOptionsFromConfig(config: Config): ApiRoleOptions {
  return {
    server: {
      host: config.HOST,
      port: config.PORT,
      prefix: config.REDIS_PREFIX,
      rateLimits: config.API_RATE_LIMITS,
      ruleCap: config.API_RULE_CAP,
      queryMaxLength: DEFAULT_MAX_LENGTH,
      bodyLimit: BODY_LIMIT_BYTES,
      tokenCacheMs: TOKEN_CACHE_MS,
      trustedProxies: config.API_TRUSTED_PROXIES,
      backfillSource: config.UPSTREAM_SEARCH,
      activity: activityOptionsFromConfig(config),
    },
    stream: filteredStreamOptionsFromConfig(config),
    conversationStream: { maxConnectionsPerApp: config.API_CONVERSATION_STREAM_MAX_CONNECTIONS },
  }
}

/**
 * Opens the clients the API owns (and closes): Postgres (refusing a schema that is behind), the
 * read replica when configured, Redis; and reads the secrets that sign pagination tokens.
 * `metrics`: the process's registry, when it exports one (served on its own port, not here).
 */
export async function apiDepsFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
): Promise<ApiRoleDeps> {
  const db = await openServiceDb({
    url: withStatementTimeout(config.DATABASE_URL),
    poolMax: config.DATABASE_POOL_MAX,
    applicationName: 'threadline-api',
    preparedStatements: config.DATABASE_PREPARED_STATEMENTS,
    logger,
  })
  // Post reads go to the replica when one is configured; it must be on the same schema version.
  const readDb = config.DATABASE_READ_URL
    ? await openServiceDb({
        url: withStatementTimeout(config.DATABASE_READ_URL),
        poolMax: config.DATABASE_POOL_MAX,
        applicationName: 'threadline-api-read',
        preparedStatements: config.DATABASE_PREPARED_STATEMENTS,
        logger,
      }).catch(async (err: unknown) => {
        await db.destroy()
        throw err
      })
    : undefined
  // The environment's secret wins; else the one the first migrate generated (rotatable).
  const tokenSecrets = config.API_TOKEN_SECRET
    ? { current: config.API_TOKEN_SECRET }
    : await apiTokenSecrets(db).catch(async (err: unknown) => {
        await db.destroy()
        if (readDb) await readDb.destroy()
        throw err
      })
  const redis = createRedis(config, 'producer', 'api')
  // Each failed connection attempt (at most one per 5 s once the backoff has grown): a JSON log
  // line where ioredis would otherwise print its own "Unhandled error event" to stderr.
  const redisLog = logger.child({ component: 'redis' })
  redis.on('error', (err) => redisLog.warn({ err }, 'redis connection error; retrying'))
  return { db, readDb, redis, logger, tokenSecrets, metrics: metrics?.api() }
}
