import { startTestWriter } from '../support/writer.js'
import { localRedis, type LocalRedis } from '../support/local-redis.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addRules, createApp, createDb } from '@threadline/db'
import { createIngest } from '@threadline/ingest'
import { createRedis } from '@threadline/redis'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { FakeUpstream } from './fake-upstream.js'
import { fastOptions, storedIds } from './harness.js'

/**
 * Redis unreachable: the ingest stops reading the stream (it holds at most two batches) instead of
 * buffering without bound, and hands everything on once Redis is back. A private redis-server is
 * stopped and restarted; the shared one is never touched.
 */
let env: TestEnv
let redis: LocalRedis

beforeAll(async () => {
  env = await createTestEnv()
  redis = await localRedis()
  await redis.start()
  env.defer(() => redis.stop())
})
afterAll(() => env?.close())

describe('ingest backpressure', () => {
  it('stops reading while Redis is unreachable and loses nothing when it returns', async () => {
    const redisUrl = redis.url
    const fake = new FakeUpstream()
    fake.keepAliveMs = 100
    await fake.start()
    env.defer(() => fake.close())
    const writer = await startTestWriter(env, { redisUrl, options: { shutdownTimeoutMs: 3_000 } })
    const batchMaxItems = 10
    const ingest = createIngest(
      {
        db: createDb({ url: env.databaseUrl, poolMax: 4 }),
        databaseUrl: env.databaseUrl,
        redis: createRedis(redisUrl, 'producer', 'bp-ingest'),
        workerRedis: createRedis(redisUrl, 'worker', 'bp-backfill'),
        prefix: env.prefix,
        logger: env.logger,
      },
      // A long stall bound: the ingest must hold the connection while it waits on Redis.
      fastOptions(fake.url, { batchMaxItems, stallMs: 60_000, leaseMs: 60_000 }),
    )
    env.defer(() => ingest.close())
    await ingest.start()

    const conv = generateConversation({ size: 200, seed: 31, startMs: Date.UTC(2026, 9, 5) })
    const app = (await createApp(env.db, 'bp')).app_id
    await addRules(env.db, app, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    await waitFor('a stream open', () => fake.openStreams === 1)
    for (const line of conv.lines.slice(0, 20)) fake.publish(line)
    await waitFor(
      'the first Posts stored',
      async () => (await storedIds(env, conv.rootId)).length === 20,
    )

    await redis.stop()
    const readBefore = ingest.stats().lines
    for (const line of conv.lines.slice(20)) fake.publish(line)
    // The reader takes at most a batch being retried, a full buffer and the line that filled it.
    await waitFor('the reader held', () => ingest.stats().lines >= readBefore + batchMaxItems)
    const held = ingest.stats().lines - readBefore
    expect(held).toBeLessThanOrEqual(2 * batchMaxItems + 1)
    expect(held).toBeLessThan(180)

    await redis.start()
    await waitFor(
      'every Post stored after Redis returned',
      async () => (await storedIds(env, conv.rootId)).length === 200,
      { timeoutMs: 30_000 },
    )
    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    expect(ingest.stats().connects).toBe(1)
    await ingest.close()
    await writer.close()
  })
})
