import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDb, listPartitions, sql, type PartitionedTable } from '@threadline/db'
import { snowflakeTime } from '@threadline/domain'
import { createQueue, addPostsBatch, type PostsJob } from '@threadline/queue'
import { createRedis } from '@threadline/redis'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { withPartitionMaintenance } from './partition-maintenance.js'
import { writerOptionsFromConfig } from './from-config.js'
import { createWriter } from './writer.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const count = async (table: string) =>
  (await sql<{ n: number }>`SELECT count(*)::int AS n FROM ${sql.table(table)}`.execute(env.db))
    .rows[0]!.n

describe('partition maintenance', () => {
  it('a batch for a day without a partition is retried, not rejected, until the leader creates it', async () => {
    // Take the newest day away, as if the maintenance job had not run for a week.
    const newest = (await listPartitions(env.db, 'posts')).at(-1)!
    for (const table of ['posts', 'post_references', 'conversations'] as PartitionedTable[]) {
      await sql`DROP TABLE ${sql.table(newest.name.replace(/^posts/, table))}`.execute(env.db)
    }
    const startMs = snowflakeTime(newest.from!)!.getTime() + 3_600_000
    const { lines } = generateConversation({ size: 3, seed: 5, startMs })

    const db = createDb({ url: env.databaseUrl, poolMax: 4, applicationName: 'partitions-test' })
    const writer = createWriter(
      { db, redis: createRedis(env.redisUrl, 'worker', 'partitions-test'), logger: env.logger },
      { ...writerOptionsFromConfig(env.config), prefix: env.prefix, shutdownTimeoutMs: 5_000 },
    )
    const queue = createQueue<PostsJob>('posts', {
      connection: env.redis,
      prefix: env.prefix,
      logger: env.logger,
    })
    env.defer(() => queue.close())
    await writer.start()
    env.defer(() => writer.close())
    const job = await addPostsBatch(queue, env.redis, env.prefix, {
      source: 'test',
      observed_at: new Date().toISOString(),
      lines,
    })
    await waitFor(
      'a failed attempt',
      async () => ((await queue.getJob(job.id!))?.attemptsMade ?? 0) >= 1,
    )

    const maintained = withPartitionMaintenance(
      { start: async () => {}, close: async () => {} },
      db,
      env.config,
      env.logger,
    )
    await maintained.start()
    env.defer(() => maintained.close())
    await waitFor('the batch stored', async () => (await count('posts')) === 3)
    expect(await count('ingest_rejects')).toBe(0)
    expect((await listPartitions(env.db, 'posts')).at(-1)).toEqual(newest)
  })
})
