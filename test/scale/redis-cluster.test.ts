import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '@threadline/config'
import {
  createDb,
  createSchema,
  dropSchema,
  migrateToLatest,
  sql,
  withSearchPath,
  type Db,
} from '@threadline/db'
import { silentLogger } from '@threadline/logger'
import {
  addPostsBatch,
  createQueue,
  enqueueWebhookDrain,
  publishActivity,
  queuePrefix,
  readActivity,
  type ActivityEntry,
  type PostsJob,
  type WebhooksJob,
} from '@threadline/queue'
import {
  closeRedis,
  createConnectionSlots,
  createLease,
  createRateLimiter,
  createRedis,
  isCluster,
  readStored,
  storedStreamKey,
  unpackStored,
  waitForRedis,
  type Redis,
  type StoredMessage,
} from '@threadline/redis'
import { generateConversation, waitFor, waitForValue } from '@threadline/testing'
import { createWriter } from '@threadline/writer'
import { testWriterOptions } from '../support/writer.js'
import { inject } from 'vitest'
import { startLocalRedisCluster, type LocalRedisCluster } from './local-redis-cluster.js'

/*
 * Everything Threadline does with Redis, on a 3-master Redis Cluster of local redis-server
 * processes this file starts and stops (never the shared Redis on 6379): BullMQ queues with
 * per-queue hash tags, the writer storing batches from the posts queue and publishing to the
 * stored stream, the ingest lease, the API's rate limiter and connection slots, webhook drains
 * (deduplicated adds) and the activity stream.
 */

const logger = silentLogger()
let cluster: LocalRedisCluster
let db: Db
let schema: string
let baseUrl: string
const prefix = `tl-cluster-${randomBytes(4).toString('hex')}`
const closers: Array<() => Promise<unknown>> = []

function connect(role: 'worker' | 'producer', name: string): Redis {
  const config = loadConfig({ REDIS_CLUSTER_NODES: cluster.seeds, REDIS_PREFIX: prefix })
  const redis = createRedis(config, role, name)
  closers.push(() => closeRedis(redis))
  return redis
}

/** The hash slot of `key`, as the cluster computes it. */
async function slotOf(key: string): Promise<number> {
  return Number(await cluster.cli(cluster.nodes[0]!.port, 'cluster', 'keyslot', key))
}

beforeAll(async () => {
  cluster = await startLocalRedisCluster(3)
  baseUrl = inject('databaseUrl')
  schema = `t_cluster_${randomBytes(4).toString('hex')}`
  await createSchema(baseUrl, schema)
  db = createDb({
    url: withSearchPath(baseUrl, schema),
    poolMax: 5,
    applicationName: 'test-cluster',
  })
  await migrateToLatest(db)
})

afterAll(async () => {
  for (const close of closers.reverse()) await close()
  await db?.destroy()
  if (schema) await dropSchema(baseUrl, schema)
  await cluster?.stop()
})

describe('Redis Cluster', () => {
  it('REDIS_CLUSTER_NODES gives a cluster client; a URL alone still gives one server', async () => {
    const redis = connect('producer', 'probe')
    expect(isCluster(redis)).toBe(true)
    await waitForRedis(redis)
    // The seeds lead to every master.
    await waitFor('all three masters known', () =>
      isCluster(redis) && redis.nodes('master').length === 3 ? true : undefined,
    )
    const single = createRedis(`redis://127.0.0.1:${cluster.nodes[0]!.port}`, 'producer', 'one')
    closers.push(() => closeRedis(single))
    expect(isCluster(single)).toBe(false)
    expect(queuePrefix('threadline', 'posts', single)).toBe('threadline')
  })

  it('keeps each queue in one slot, different queues apart, and an explicit tag as given', async () => {
    const redis = connect('producer', 'slots')
    const posts = queuePrefix(prefix, 'posts', redis)
    const activity = queuePrefix(prefix, 'activity', redis)
    expect(posts).toBe(`${prefix}:{posts}`)
    const postsSlots = new Set(
      await Promise.all(
        ['wait', 'active', 'meta', 'id', 'events', '123'].map((s) => slotOf(`${posts}:posts:${s}`)),
      ),
    )
    expect(postsSlots.size).toBe(1)
    expect(await slotOf(`${activity}:activity:wait`)).not.toBe([...postsSlots][0])
    expect(queuePrefix('{tl}', 'posts', redis)).toBe('{tl}')
    expect(queuePrefix('tl{}', 'posts', redis)).toBe('tl{}:{posts}')
  })

  it('the writer stores batches from the posts queue and publishes them to the stored stream', async () => {
    const producer = connect('producer', 'ingest')
    const reader = connect('producer', 'api')
    const seen = new Set<string>()
    const stored = readStored(reader, {
      prefix,
      batch: 100,
      blockMs: 500,
      logger,
      onMessages: (messages: StoredMessage[]) => {
        for (const m of messages) if (m.type === 'post') seen.add(m.id)
      },
    })
    closers.push(() => stored.close())
    await stored.ready

    const writer = createWriter(
      { db, redis: connect('worker', 'writer'), logger },
      { ...testWriterOptions, prefix },
    )
    closers.push(() => writer.close())
    await writer.start()

    const queue = createQueue<PostsJob>('posts', { connection: producer, prefix, logger })
    closers.push(() => queue.close())
    const conversations = [1, 2, 3].map((seed) =>
      generateConversation({ size: 40, seed, startMs: Date.UTC(2026, 0, seed), padding: true }),
    )
    const lines = conversations.flatMap((c) => c.lines)
    const ids = new Set(conversations.flatMap((c) => c.ids))
    // As the ingest queues them: a batch past 16 KB in a payload key beside its job.
    const jobs = []
    for (let i = 0; i < lines.length; i += 25) {
      jobs.push(
        await addPostsBatch(queue, producer, prefix, {
          source: 'test',
          observed_at: new Date().toISOString(),
          lines: lines.slice(i, i + 25),
        }),
      )
    }
    const payloads = jobs.flatMap((job) => (job.data.payload ? [job.data.payload] : []))
    expect(payloads.length).toBeGreaterThan(0)

    await waitFor(
      `${ids.size} Posts stored`,
      async () => {
        const { rows } = await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(db)
        return Number(rows[0]!.n) >= ids.size ? true : undefined
      },
      { timeoutMs: 60_000 },
    )
    const { rows } = await sql<{ id: string }>`SELECT id FROM posts`.execute(db)
    expect(new Set(rows.map((r) => r.id))).toEqual(ids)
    await waitFor('every Post on the stored stream', () =>
      [...ids].every((id) => seen.has(id)) ? true : undefined,
    )
    const entries = await reader.xrange(storedStreamKey(prefix), '-', '+')
    expect(entries.flatMap(([, f]) => unpackStored(f)).length).toBeGreaterThanOrEqual(ids.size)
    await waitFor('the posts queue drained', async () =>
      (await queue.getJobCounts('waiting', 'active', 'completed')).completed === jobs.length
        ? true
        : undefined,
    )
    expect((await queue.getJobCounts('failed')).failed).toBe(0)
    // Each payload was deleted once its batch was committed.
    for (const key of payloads) expect(await producer.exists(key)).toBe(0)
  })

  it('the ingest lease has one holder at a time', async () => {
    const a = createLease(connect('producer', 'lease-a'), `${prefix}:ingest:leader`, {
      ttlMs: 2_000,
    })
    const b = createLease(connect('producer', 'lease-b'), `${prefix}:ingest:leader`, {
      ttlMs: 2_000,
    })
    closers.push(
      () => a.release(),
      () => b.release(),
    )
    expect(await a.tryAcquire()).toBe(true)
    expect(await b.tryAcquire()).toBe(false)
    // Renewal (a Lua script on the key's node) keeps it: b still cannot take it after a renewal.
    const { ttl: renewed } = await waitForValue(
      'a renewal',
      async () => {
        const ttl = await connect('producer', 'lease-ttl').pttl(`${prefix}:ingest:leader`)
        return ttl > 1_900 ? { ttl } : undefined
      },
      { timeoutMs: 5_000, intervalMs: 20 },
    )
    expect(renewed).toBeGreaterThan(1_900)
    expect(await b.tryAcquire()).toBe(false)
    await a.release()
    expect(a.held).toBe(false)
    expect(await b.tryAcquire()).toBe(true)
  })

  it('the rate limiter counts across replicas', async () => {
    const one = createRateLimiter(connect('producer', 'rl-1'), { prefix })
    const two = createRateLimiter(connect('producer', 'rl-2'), { prefix })
    const now = Date.now()
    const results = []
    // The first request of a window waits for Redis in each replica, so counts are exact here.
    results.push(await one.hit('tweets-lookup', 'token-1', 3, now))
    results.push(await two.hit('tweets-lookup', 'token-1', 3, now))
    expect(results.map((r) => r.remaining)).toEqual([2, 1])
    const third = await one.hit('tweets-lookup', 'token-1', 3, now)
    expect(third.allowed).toBe(true)
    await waitFor('the third count stored', async () => {
      const keys = await connect('producer', 'rl-read').get(
        `${prefix}:rl:tweets-lookup:token-1:${now - (now % one.windowMs)}`,
      )
      return keys === '3' ? true : undefined
    })
    const fresh = createRateLimiter(connect('producer', 'rl-3'), { prefix })
    expect((await fresh.hit('tweets-lookup', 'token-1', 3, now)).allowed).toBe(false)
  })

  it('connection slots are shared and refreshed across groups on different nodes', async () => {
    const redis = connect('producer', 'slots-a')
    const slots = createConnectionSlots(redis, { prefix, ttlMs: 600, logger })
    closers.push(async () => slots.close())
    // Groups whose keys hash to different slots: the refresh must not be one cross-slot pipeline.
    const groups = ['app-1', 'app-2', 'app-3', 'app-4']
    const keySlots = await Promise.all(groups.map((g) => slotOf(`${prefix}:slots:${g}`)))
    expect(new Set(keySlots).size).toBeGreaterThan(1)
    for (const g of groups) expect(await slots.acquire(g, 1)).toBeTypeOf('function')
    const other = createConnectionSlots(connect('producer', 'slots-b'), { prefix, ttlMs: 600 })
    closers.push(async () => other.close())
    expect(await other.acquire('app-1', 1)).toBeUndefined()
    // Refreshed slots outlive their first ttl: still taken well after 600 ms.
    const started = Date.now()
    await waitFor('three ttls', () => (Date.now() - started > 1_800 ? true : undefined), {
      timeoutMs: 5_000,
    })
    for (const g of groups) expect(await other.acquire(g, 1)).toBeUndefined()
  })

  it('webhook drains deduplicate and the activity stream is read back', async () => {
    const redis = connect('producer', 'delivery')
    const webhooks = createQueue<WebhooksJob>('webhooks', { connection: redis, prefix, logger })
    closers.push(() => webhooks.close())
    await enqueueWebhookDrain(webhooks, ['11', '11', '12'])
    expect((await webhooks.getJobCounts('waiting')).waiting).toBe(2)

    const got: ActivityEntry[] = []
    const reader = readActivity(
      connect('producer', 'api-activity'),
      prefix,
      (e) => got.push(...e),
      {
        blockMs: 500,
      },
    )
    closers.push(() => reader.close())
    await reader.ready
    await publishActivity(redis, prefix, [{ app_id: '1', body: '{"x":1}' }], 600_000)
    await waitFor('the activity entry', () => (got.length === 1 ? true : undefined))
    expect(got[0]).toMatchObject({ app_id: '1', body: '{"x":1}' })
  })
})
