import { startTestWriter } from '../support/writer.js'
import { localRedis, type LocalRedis } from '../support/local-redis.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addRules, createApp, createDb } from '@threadline/db'
import { createIngest } from '@threadline/ingest'
import { createRedis, parseInfoMemory } from '@threadline/redis'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { FakeUpstream } from './fake-upstream.js'
import { fastOptions, storedIds } from './harness.js'

/**
 * A full Redis (docs/architecture.md, "Backpressure"): with no writer running, the stream fills
 * the queue; the ingest stops adding jobs below `maxmemory`, so Redis never refuses a write (an
 * OOM error) and the writers, once started, drain it; nothing is lost. A private redis-server with
 * a small maxmemory and production's eviction policy; the shared one is never touched.
 */
const MAX_MEMORY = 6 * 1024 * 1024
const POSTS = 8_000

let env: TestEnv
let redis: LocalRedis

beforeAll(async () => {
  env = await createTestEnv()
  redis = await localRedis(['--maxmemory', String(MAX_MEMORY), '--maxmemory-policy', 'noeviction'])
  await redis.start()
  env.defer(() => redis.stop())
})
afterAll(() => env?.close())

describe('ingest against a full Redis', () => {
  it('pauses below maxmemory, never meets an OOM refusal, and loses nothing once writers drain', async () => {
    const probe = createRedis(redis.url, 'producer', 'full-probe')
    env.defer(() => probe.quit())
    const oomRefusals = async () =>
      Number(/^errorstat_OOM:count=(\d+)/m.exec(await probe.info('errorstats'))?.[1] ?? 0)

    const fake = new FakeUpstream()
    fake.keepAliveMs = 100
    await fake.start()
    env.defer(() => fake.close())
    const ingest = createIngest(
      {
        db: createDb({ url: env.databaseUrl, poolMax: 4 }),
        databaseUrl: env.databaseUrl,
        redis: createRedis(redis.url, 'producer', 'full-ingest'),
        workerRedis: createRedis(redis.url, 'worker', 'full-backfill'),
        prefix: env.prefix,
        logger: env.logger,
      },
      fastOptions(fake.url, {
        batchMaxItems: 20,
        stallMs: 120_000,
        leaseMs: 60_000,
        redisRoom: { sampleMs: 50 },
      }),
    )
    env.defer(() => ingest.close())
    await ingest.start()

    const conv = generateConversation({ size: POSTS, seed: 47, startMs: Date.UTC(2026, 9, 5) })
    const app = (await createApp(env.db, 'full')).app_id
    await addRules(env.db, app, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    await waitFor('a stream open', () => fake.openStreams === 1)
    for (const line of conv.lines) fake.publish(line)

    await waitFor('the ingest paused for a nearly full Redis', () => ingest.stats().redisPaused, {
      timeoutMs: 60_000,
    })
    const full = parseInfoMemory(await probe.info('memory'))
    expect(full.used).toBeLessThan(MAX_MEMORY)
    expect(ingest.stats().lines).toBeLessThan(POSTS)

    // A short replay window: the stored stream then gives its memory back within the test's time.
    const writer = await startTestWriter(env, {
      redisUrl: redis.url,
      options: { streamRetentionMs: 2_000 },
    })
    await waitFor(
      'every Post stored once writers drained Redis',
      async () => (await storedIds(env, conv.rootId)).length === POSTS,
      { timeoutMs: 90_000 },
    )
    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    expect(await oomRefusals()).toBe(0)
    expect(ingest.stats().connects).toBe(1)
    // A backfill page may still meet Redis nearly full (the stored stream is trimmed every 2 s).
    await waitFor('adding resumed', () => ingest.stats().redisPaused === false, {
      timeoutMs: 30_000,
    })
    await ingest.close()
    await writer.close()
  }, 180_000)
})
