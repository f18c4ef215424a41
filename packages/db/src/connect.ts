import { CompiledQuery, Kysely, PostgresDialect } from 'kysely'
import pg from 'pg'
import type { Logger } from '@threadline/logger'
import type { Database } from './tables/index.js'
import { isMissingPartition } from './partitions.js'

export type Db = Kysely<Database>

export interface DbOptions {
  url: string
  poolMax?: number
  /** Shows in pg_stat_activity, so operators (and fault tests) can tell roles apart. */
  applicationName?: string
  logger?: Logger
  /**
   * Run the statements that ask for it (queryRows' `prepare`) as named prepared statements
   * (default true): Postgres then parses and plans each of them once per connection instead of on
   * every call. Turn off behind a pooler that cannot keep them (PgBouncer in transaction mode
   * before 1.21, or without `max_prepared_statements`).
   */
  preparedStatements?: boolean
}

/** Distinct statement texts given a name, process-wide; past this many, the rest run unnamed. */
const MAX_PREPARED = 256
const preparedNames = new Map<string, string>()

function preparedName(text: string): string | undefined {
  let name = preparedNames.get(text)
  if (name === undefined && preparedNames.size < MAX_PREPARED) {
    name = `threadline_${preparedNames.size}`
    preparedNames.set(text, name)
  }
  return name
}

/** The pool under each Db that createDb made, and whether it may name statements. */
const pools = new WeakMap<Db, { pool: pg.Pool; prepare: boolean }>()

/**
 * Runs one statement straight on the pool under `db`. With `prepare`, as a named prepared
 * statement (pg's `{ name, text, values }`): for hot statements whose text depends only on their
 * shape (values travel as parameters), since each distinct text becomes one prepared statement on
 * every connection that runs it. Falls back to Kysely when `db` is not a pool's (a transaction).
 */
export async function queryRows<R>(
  db: Db,
  text: string,
  values: readonly unknown[],
  { prepare = false }: { prepare?: boolean } = {},
): Promise<R[]> {
  const under = pools.get(db)
  if (!under) return (await db.executeQuery<R>(CompiledQuery.raw(text, [...values]))).rows
  const name = prepare && under.prepare ? preparedName(text) : undefined
  const result = await under.pool.query({ name, text, values: [...values] })
  return result.rows as R[]
}

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
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool }),
    log: log
      ? (event) => {
          if (event.level === 'error') {
            log.debug({ err: event.error, ms: event.queryDurationMillis }, 'query failed')
          }
        }
      : undefined,
  })
  pools.set(db, { pool, prepare: options.preparedStatements ?? true })
  return db
}

/**
 * SQLSTATE classes that mean "this input is wrong", as opposed to "try again later". A row for a
 * day whose partition the maintenance job has not made yet is the latter.
 */
export function isDataError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code
  return typeof code === 'string' && /^(22|23|54)/.test(code) && !isMissingPartition(err)
}
