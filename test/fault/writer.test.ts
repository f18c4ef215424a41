import { spawn, type ChildProcess } from 'node:child_process'
import { once } from 'node:events'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createDb, sql, terminateConnections } from '@threadline/db'
import { addPostsBatch, createQueue, postsPayloadKey, type PostsJob } from '@threadline/queue'
import { createRedis, storedStreamKey, unpackStored } from '@threadline/redis'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { createWriter } from '@threadline/writer'
import { startTestWriter, testWriterOptions } from '../support/writer.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

async function queueConversations(
  prefix: string,
  conversations: number,
  size: number,
  batch: number,
) {
  const queue = createQueue<PostsJob>('posts', {
    connection: env.redis,
    prefix,
    logger: env.logger,
  })
  const all: string[] = []
  for (let c = 0; c < conversations; c++) {
    all.push(
      ...generateConversation({ size, seed: 100 + c, startMs: Date.UTC(2026, 9, 1 + c) }).lines,
    )
  }
  // As the ingest queues them: each batch's lines in a payload key beside its job.
  let jobs = 0
  for (let i = 0; i < all.length; i += batch, jobs++) {
    await addPostsBatch(queue, env.redis, prefix, {
      source: 'test',
      observed_at: new Date().toISOString(),
      lines: all.slice(i, i + batch),
    })
  }
  expect(await env.redis.keys(postsPayloadKey(prefix, '*'))).toHaveLength(jobs)
  await queue.close()
  return { lines: all.length, jobs }
}

async function verifyExactlyOnce(db: TestEnv['db'], expectedPosts: number, prefix: string) {
  const { rows } = await sql<{
    posts: string
    convs: string
    sum_counts: string
    mismatched: string
  }>`
    SELECT (SELECT count(*) FROM posts) AS posts,
           (SELECT count(*) FROM conversations) AS convs,
           (SELECT sum(post_count) FROM conversations) AS sum_counts,
           (SELECT count(*) FROM conversations c
              WHERE c.post_count <> (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id)
                 OR c.reply_count <> (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id AND p.in_reply_to_post_id IS NOT NULL)
           ) AS mismatched`.execute(db)
  expect(rows[0]).toEqual({
    posts: String(expectedPosts),
    convs: expect.any(String),
    sum_counts: String(expectedPosts),
    mismatched: '0',
  })
  // Every stored Post reached the `stored` stream (at least once) once the outbox drained.
  await waitFor(
    'outbox drained',
    async () =>
      Number(
        (await sql<{ n: string }>`SELECT count(*) AS n FROM outbox`.execute(db)).rows[0]!.n,
      ) === 0,
  )
  const entries = await env.redis.xrange(storedStreamKey(prefix), '-', '+')
  const ids = new Set(entries.flatMap(([, fields]) => unpackStored(fields).map((e) => e.id)))
  expect(ids.size).toBe(expectedPosts)
  // Every payload was deleted once its batch was committed, the killed one's by its retry.
  expect(await env.redis.keys(postsPayloadKey(prefix, '*'))).toEqual([])
}

function startWriterProcess(prefix: string): ChildProcess {
  const args = ['--import', 'tsx', 'test/support/tuned-cli.ts', 'start', '--roles', 'writer']
  const child = spawn(process.execPath, args, {
    env: {
      ...process.env,
      ...env.env,
      REDIS_PREFIX: prefix,
      WRITER_CONCURRENCY: '2',
      THREADLINE_TEST_TUNING: JSON.stringify({
        writer: { lockDuration: 2_000, stalledInterval: 1_000 },
      }),
    },
    stdio: ['ignore', 'ignore', 'pipe'],
  })
  env.defer(() => {
    if (child.exitCode === null) child.kill('SIGKILL')
  })
  return child
}

describe('writer under faults', () => {
  it('loses and doubles nothing when killed with SIGKILL mid-batch and restarted', async () => {
    const prefix = `${env.prefix}:kill`
    const { lines, jobs } = await queueConversations(prefix, 6, 2000, 300)
    const counts = createQueue('posts', { connection: env.redis, prefix, logger: env.logger })
    env.defer(() => counts.close())

    const first = startWriterProcess(prefix)
    // Kill while a batch is in hand and only part of the import is stored.
    await waitFor(
      'a batch in progress after some were stored',
      async () => {
        const { n } = (await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(env.db))
          .rows[0]!
        return Number(n) > 0 && Number(n) < lines && (await counts.getActiveCount()) > 0
      },
      { intervalMs: 10, timeoutMs: 60_000 },
    )
    first.kill('SIGKILL')
    await once(first, 'exit')
    const storedAtKill = Number(
      (await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(env.db)).rows[0]!.n,
    )
    expect(storedAtKill).toBeLessThan(lines)

    const second = startWriterProcess(prefix)
    await waitFor(
      'every batch completed',
      async () => (await counts.getCompletedCount()) === jobs,
      { timeoutMs: 90_000 },
    )
    await verifyExactlyOnce(env.db, lines, prefix)
    second.kill('SIGTERM')
    const [code] = await once(second, 'exit')
    expect(code).toBe(0)
  })

  it('completes an import with nothing lost while its Postgres connections are killed', async () => {
    await sql`TRUNCATE posts, post_references, users, conversations, outbox, ingest_rejects`.execute(
      env.db,
    )
    const prefix = `${env.prefix}:pgkill`
    const appName = `writer-${env.schema}`
    const db = createDb({ url: env.databaseUrl, poolMax: 4, applicationName: appName })
    const writer = createWriter(
      { db, redis: createRedis(env.redisUrl, 'worker'), logger: env.logger },
      { ...testWriterOptions, prefix, lockDuration: 5_000, stalledInterval: 1_000 },
    )
    env.defer(() => writer.close())
    const { lines, jobs } = await queueConversations(prefix, 4, 1500, 200)
    const counts = createQueue('posts', { connection: env.redis, prefix, logger: env.logger })
    env.defer(() => counts.close())
    await writer.start()

    // Cut the writer off from Postgres again and again for a few seconds while it works.
    let kills = 0
    const deadline = Date.now() + 3_000
    while (Date.now() < deadline && (await counts.getCompletedCount()) < jobs) {
      kills += await terminateConnections(env.databaseUrl, appName)
      await new Promise((r) => setImmediate(r))
    }
    expect(kills).toBeGreaterThan(0)
    await waitFor(
      'every batch completed',
      async () => (await counts.getCompletedCount()) === jobs,
      { timeoutMs: 120_000 },
    )
    expect(await counts.getFailedCount()).toBe(0)
    await verifyExactlyOnce(env.db, lines, prefix)
  })

  it('completes a job whose payload a committing writer already deleted, storing nothing', async () => {
    const prefix = `${env.prefix}:gone`
    await queueConversations(prefix, 1, 100, 100)
    const [key] = await env.redis.keys(postsPayloadKey(prefix, '*'))
    // What a writer that committed, deleted the payload and died before completing leaves.
    await env.redis.del(key!)
    const before = Number(
      (await sql<{ n: string }>`SELECT count(*) AS n FROM ingest_rejects`.execute(env.db)).rows[0]!
        .n,
    )
    const queue = createQueue('posts', { connection: env.redis, prefix, logger: env.logger })
    env.defer(() => queue.close())
    await startTestWriter({ ...env, prefix })
    await waitFor('the job completed', async () => (await queue.getCompletedCount()) === 1)
    const [job] = await queue.getJobs(['completed'])
    expect(job!.returnvalue).toEqual({ inserted: 0, updated: 0, users: 0, rejects: 0, lines: 0 })
    expect(await queue.getFailedCount()).toBe(0)
    const after = Number(
      (await sql<{ n: string }>`SELECT count(*) AS n FROM ingest_rejects`.execute(env.db)).rows[0]!
        .n,
    )
    expect(after).toBe(before)
  })

  it('deletes a payload whose job never came, and stores the batches that have one', async () => {
    const prefix = `${env.prefix}:orphan`
    const { jobs } = await queueConversations(prefix, 1, 100, 50)
    // What a process that died between writing a payload and adding its job leaves.
    const orphan = postsPayloadKey(prefix, 'never-added')
    await env.redis.set(orphan, '{"data":{"id":"1","text":"lost add"}}')
    const queue = createQueue('posts', { connection: env.redis, prefix, logger: env.logger })
    env.defer(() => queue.close())
    await startTestWriter(
      { ...env, prefix },
      { options: { payloadSweepMs: 100, payloadMinIdleSeconds: 0 } },
    )
    await waitFor('the orphan payload deleted', async () => (await env.redis.exists(orphan)) === 0)
    await waitFor('every batch stored', async () => (await queue.getCompletedCount()) === jobs)
    expect(await queue.getFailedCount()).toBe(0)
    expect(await env.redis.keys(postsPayloadKey(prefix, '*'))).toEqual([])
  })
})
