import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from '@threadline/db'
import {
  addPostsBatch,
  createActivityQueue,
  createQueue,
  type Job,
  type PostsJob,
  type PostsJobResult,
} from '@threadline/queue'
import { storedStreamKey, unpackStored } from '@threadline/redis'
import {
  createTestEnv,
  generateConversation,
  testWorkerOptions,
  waitForValue,
  workerClients,
  type TestEnv,
} from '@threadline/testing'
import { storeLines } from '../store-lines.js'
import { createWriter, type Writer, type WriterOptions } from '../writer.js'

let env: TestEnv
let writer: Writer
let queue: ReturnType<typeof createQueue<PostsJob, PostsJobResult>>

const options = (prefix: string): WriterOptions => ({
  ...testWorkerOptions,
  prefix,
  relayIntervalMs: 100,
})

beforeAll(async () => {
  env = await createTestEnv()
  writer = createWriter(
    workerClients(env, 'test-writer', { applicationName: `${env.schema}-writer` }),
    options(env.prefix),
  )
  env.defer(() => writer.close())
  await writer.start()
  queue = createQueue<PostsJob, PostsJobResult>('posts', {
    connection: env.redis,
    prefix: env.prefix,
    logger: env.logger,
  })
  env.defer(() => queue.close())
})
afterAll(() => env?.close())

const count = async (query: string) =>
  Number((await sql.raw<{ n: string }>(query).execute(env.db)).rows[0]!.n)

/** Waits until the job has completed `times` times (its finishedOn moves on each completion). */
async function completed(id: string, after = 0): Promise<Job<PostsJob, PostsJobResult>> {
  return waitForValue(`job ${id} completed`, async () => {
    const job = await queue.getJob(id)
    const state = await job?.getState()
    return state === 'completed' && (job!.finishedOn ?? 0) > after ? job! : undefined
  })
}

/**
 * What a writer that died after its batch committed, before BullMQ marked the job done, leaves
 * behind: the job comes back, its payload still there (the writer deletes it after commit).
 */
async function runAgain(job: Job<PostsJob, PostsJobResult>, lines: readonly string[]) {
  if (lines.length > 0) await env.redis.rpush(job.data.payload, ...lines)
  await job.retry('completed')
  return completed(job.id!, job.finishedOn)
}

describe('a posts job run again after its batch committed', () => {
  it('keeps, stores and publishes nothing twice', async () => {
    const userLine = (name: string, id: string) =>
      JSON.stringify({
        data: { id, text: 'hello', author_id: '42' },
        includes: { users: [{ id: '42', name, username: 'someone' }] },
      })
    // The user is known under another name, so the batch brings a user change too.
    await storeLines(
      env.db,
      [userLine('Before', '1860000000000000001')],
      '2026-11-21T00:00:00Z',
      'test',
    )
    await writer.relay()
    const { lines: thread } = generateConversation({ size: 20, seed: 4 })
    const bad = ['not json', JSON.stringify({ data: { text: 'no id' } })]
    const lines = [...thread, ...bad, userLine('After', '1860000000000000002')]
    const added = await addPostsBatch(queue, env.redis, env.prefix, {
      source: 'test',
      observed_at: '2026-11-21T00:01:00Z',
      lines,
    })
    const first = await completed(added.id!)
    expect(first.returnvalue).toMatchObject({ inserted: 21, rejects: 2, lines: 23 })

    const again = await runAgain(first, lines)
    expect(again.returnvalue).toEqual({ inserted: 0, updated: 0, users: 0, rejects: 0, lines: 23 })
    await writer.relay()

    expect(await count('SELECT count(*) AS n FROM ingest_rejects')).toBe(2)
    expect(await count('SELECT count(*) AS n FROM posts')).toBe(22)
    expect(await count('SELECT sum(post_count) AS n FROM conversations')).toBe(20)
    expect(await count('SELECT count(*) AS n FROM outbox')).toBe(0)
    // The `stored` stream and the `activity` jobs carry each Post (the one stored first too) and
    // the user change once.
    const entries = (await env.redis.xrange(storedStreamKey(env.prefix), '-', '+')).flatMap(
      ([, fields]) => unpackStored(fields).map((e) => `${e.type}:${e.id}`),
    )
    expect(entries).toHaveLength(22 + 1)
    expect(new Set(entries).size).toBe(entries.length)
    const activity = createActivityQueue(env.redis, env.prefix, env.logger)
    env.defer(() => activity.close())
    const events = (await activity.getJobs(['waiting', 'delayed', 'prioritized'])).flatMap((j) => [
      ...j.data.post_ids,
      ...j.data.user_changes.map((c) => `user:${c.id}`),
    ])
    expect(events).toHaveLength(22 + 1)
    expect(new Set(events).size).toBe(events.length)
  })

  it('keeps an unreadable job once', async () => {
    const bogus = await queue.add('posts', { nonsense: true } as unknown as PostsJob)
    const first = await completed(bogus.id!)
    expect(first.returnvalue).toMatchObject({ rejects: 1 })
    const again = await runAgain(first, [])
    expect(again.returnvalue).toMatchObject({ rejects: 0 })
    expect(await count("SELECT count(*) AS n FROM ingest_rejects WHERE source = 'queue'")).toBe(1)
  })
})
