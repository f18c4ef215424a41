import { Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import type { Logger } from '@threadline/logger'
import type { Database } from './tables/index.js'

export type Db = Kysely<Database>

export interface DbOptions {
  url: string
  poolMax?: number
  /** Shows in pg_stat_activity, so operators (and fault tests) can tell roles apart. */
  applicationName?: string
  logger?: Logger
}

/**
 * A Kysely instance over a pg pool. int8 stays a string (pg's default): ids are 64-bit and must
 * never pass through a JS number.
 */
export function createDb(options: DbOptions): Db {
  const pool = new pg.Pool({
    connectionString: options.url,
    max: options.poolMax ?? 10,
    application_name: options.applicationName ?? 'threadline',
    connectionTimeoutMillis: 10_000,
    idleTimeoutMillis: 30_000,
  })
  const log = options.logger?.child({ component: 'db' })
  // @NOTE an idle client's error (server restart, terminated backend) must not crash the process;
  // the pool drops that client and the next query gets a fresh one.
  pool.on('error', (err) => log?.warn({ err }, 'idle Postgres connection failed'))
  // A client that is checked out when its connection dies emits 'error' with no pool listener
  // attached: unhandled, that would crash the process. The query in flight still rejects (and is
  // retried by its caller), and the pool discards the dead client on release.
  pool.on('connect', (client) => {
    client.on('error', (err) => log?.warn({ err }, 'Postgres connection lost'))
  })
  return new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: log
      ? (event) => {
          if (event.level === 'error') {
            log.debug({ err: event.error, ms: event.queryDurationMillis }, 'query failed')
          }
        }
      : undefined,
  })
}

/** SQLSTATE classes that mean "this input is wrong", as opposed to "try again later". */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^(22|23|54)/.test(code)
}
