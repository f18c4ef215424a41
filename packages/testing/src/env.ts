import { randomBytes } from 'node:crypto'
import { inject } from 'vitest'
import { loadConfig, type Config } from '@threadline/config'
import {
  createDb,
  createSchema,
  dropSchema,
  migrateToLatest,
  withSearchPath,
  type Db,
} from '@threadline/db'
import { silentLogger, type Logger } from '@threadline/logger'
import { closeRedis, createRedis, deleteByPrefix, type Redis } from '@threadline/redis'

export interface TestEnv {
  /** A URL whose search_path is this file's own schema. */
  databaseUrl: string
  redisUrl: string
  schema: string
  /** This file's own BullMQ prefix (and `stored` stream key prefix). */
  prefix: string
  db: Db
  redis: Redis
  logger: Logger
  /** Configuration as a service of this file would read it (child processes get `env`). */
  config: Config
  env: Record<string, string>
  /** Registers something to close at teardown (workers, servers, clients); runs in reverse. */
  defer(fn: () => Promise<unknown> | unknown): void
  close(): Promise<void>
}

/**
 * A fresh, migrated Postgres schema and a private Redis key prefix for one test file. Call it in
 * beforeAll and `close()` in afterAll: closing runs what was deferred, then drops the schema and
 * the prefix's keys.
 */
export async function createTestEnv(overrides: Record<string, string> = {}): Promise<TestEnv> {
  const baseUrl = inject('databaseUrl')
  const redisUrl = inject('redisUrl')
  const id = randomBytes(5).toString('hex')
  const schema = `t_${id}`
  const prefix = `tl-test-${id}`
  await createSchema(baseUrl, schema)
  const databaseUrl = withSearchPath(baseUrl, schema)
  const db = createDb({ url: databaseUrl, poolMax: 5, applicationName: `test-${id}` })
  await migrateToLatest(db)
  const redis = createRedis(redisUrl, 'worker', `test-${id}`)
  const env = {
    DATABASE_URL: databaseUrl,
    REDIS_URL: redisUrl,
    REDIS_PREFIX: prefix,
    LOG_LEVEL: 'silent',
    // Test processes would all compete for the default metrics port; tests that scrape set one.
    METRICS_PORT: '0',
    ...overrides,
  }
  const deferred: Array<() => Promise<unknown> | unknown> = []
  return {
    databaseUrl,
    redisUrl,
    schema,
    prefix,
    db,
    redis,
    logger: silentLogger(),
    config: loadConfig(env),
    env,
    defer: (fn) => void deferred.push(fn),
    async close() {
      for (const fn of deferred.reverse()) await fn()
      await db.destroy()
      await deleteByPrefix(redis, prefix)
      await closeRedis(redis)
      await dropSchema(baseUrl, schema)
    },
  }
}
