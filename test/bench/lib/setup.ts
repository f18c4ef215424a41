import { randomBytes } from 'node:crypto'
import {
  createDb,
  createSchema,
  dropSchema,
  migrateToLatest,
  withSearchPath,
  type Db,
} from '@threadline/db'
import { closeRedis, createRedis, deleteByPrefix } from '@threadline/redis'
import { resolveTestServices, type TestServices } from '@threadline/testing'
import { loadConfig } from '@threadline/config'
import { writerOptionsFromConfig, type WriterOptions } from '@threadline/writer'

export interface BenchEnv {
  services: TestServices
  databaseUrl: string
  redisUrl: string
  schema: string
  prefix: string
  db: Db
  close(): Promise<void>
}

/** A fresh migrated schema and Redis prefix for one benchmark run (found as the tests find them). */
export async function benchEnv(name: string): Promise<BenchEnv> {
  const services = await resolveTestServices()
  const id = `${name}_${randomBytes(3).toString('hex')}`
  const schema = `bench_${id}`
  const prefix = `tl-bench-${id}`
  await createSchema(services.databaseUrl, schema)
  const databaseUrl = withSearchPath(services.databaseUrl, schema)
  const db = createDb({ url: databaseUrl, poolMax: 4, applicationName: `bench-${name}` })
  await migrateToLatest(db)
  return {
    services,
    databaseUrl,
    redisUrl: services.redisUrl,
    schema,
    prefix,
    db,
    async close() {
      await db.destroy()
      await dropSchema(services.databaseUrl, schema)
      // Every key the run made (queues, payloads, the stored stream), not only the ones it drained.
      const redis = createRedis(services.redisUrl, 'producer', 'bench-cleanup')
      await deleteByPrefix(redis, prefix)
      await closeRedis(redis)
      await services.stop()
    },
  }
}

export const log = (line: string) => process.stderr.write(`${line}\n`)

/**
 * A writer running inside a benchmark's process: production's options, one job at a time (the
 * bench measures latency from commit), a quick shutdown and a relay every second.
 */
export const benchWriterOptions: WriterOptions = {
  ...writerOptionsFromConfig(loadConfig({})),
  concurrency: 1,
  maxStalledCount: 5,
  shutdownTimeoutMs: 5_000,
  relayIntervalMs: 1_000,
}
