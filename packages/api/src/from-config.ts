import type { Config } from '@threadline/config'
import { apiTokenSecrets, openServiceDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Metrics } from '@threadline/metrics'
import { createRedis } from '@threadline/redis'
import { DEFAULT_MAX_LENGTH } from '@threadline/query'
import { activityOptionsFromConfig, type ActivityApiOptions } from './activity/options.js'
import { instrumentHttp } from './metrics.js'
import { buildServer, type ApiServer } from './server.js'
import {
  filteredStreamOptions,
  registerConversationStream,
  registerFilteredStream,
} from './stream/index.js'
import type { FilteredStreamOptions } from './routes/stream.js'
import type { ApiOptions } from './types.js'

/** Every statement of the API gives up after this long: a hostile query costs bounded time. */
const STATEMENT_TIMEOUT_MS = 10_000
/** Request bodies past this are a 413 (X's figure). */
const BODY_LIMIT_BYTES = 1_048_576
/** How long a bearer token's lookup is reused, so a hot client costs no query per request. */
const TOKEN_CACHE_MS = 10_000

/** What tests may change besides configuration (timings, buffers, the clock). */
export interface ApiTuning {
  server?: Partial<ApiOptions>
  stream?: Partial<FilteredStreamOptions>
  activity?: Partial<ActivityApiOptions>
}

function withStatementTimeout(url: string): string {
  const u = new URL(url)
  const prior = u.searchParams.get('options')
  u.searchParams.set(
    'options',
    `${prior ? `${prior} ` : ''}-c statement_timeout=${STATEMENT_TIMEOUT_MS}`,
  )
  return u.toString()
}

/**
 * Builds the read API and the clients it owns from configuration. Refuses a schema that is behind.
 * `metrics`: the process's registry, when it exports one (served on its own port, not here).
 */
export async function apiFromConfig(
  config: Config,
  logger: Logger,
  metrics?: Metrics,
  tuning: ApiTuning = {},
): Promise<ApiServer> {
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
  const secrets = config.API_TOKEN_SECRET
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
  const server = buildServer({
    db,
    readDb,
    redis,
    logger,
    options: {
      host: config.HOST,
      port: config.PORT,
      prefix: config.REDIS_PREFIX,
      rateLimits: config.API_RATE_LIMITS,
      ruleCap: config.API_RULE_CAP,
      queryMaxLength: DEFAULT_MAX_LENGTH,
      bodyLimit: BODY_LIMIT_BYTES,
      tokenCacheMs: TOKEN_CACHE_MS,
      trustedProxies: config.API_TRUSTED_PROXIES,
      tokenSecret: secrets.current,
      previousTokenSecret: secrets.previous,
      backfillSource: config.UPSTREAM_SEARCH,
      activity: activityOptionsFromConfig(config, tuning.activity),
      ...tuning.server,
    },
  })
  const stream = registerFilteredStream(server.app, {
    db,
    redis,
    logger,
    options: filteredStreamOptions(config, tuning.stream),
  })
  registerConversationStream(server.app, stream, {
    maxConnectionsPerApp: config.API_CONVERSATION_STREAM_MAX_CONNECTIONS,
  })
  if (metrics) {
    instrumentHttp(server.app, metrics.api())
    metrics.api().tokenLookups(server.tokenLookups)
  }
  return server
}
