import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RULES_CHANNEL, listen, sql, terminateConnections } from '@threadline/db'
import { closeRedis, createLease, createRedis } from '@threadline/redis'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('createLease', () => {
  it('lets one holder at a time in, renews, and releases only its own lease', async () => {
    const redis = createRedis(env.redisUrl, 'producer', 'lease-test')
    env.defer(() => closeRedis(redis))
    const key = `${env.prefix}:lease`
    const a = createLease(redis, key, { ttlMs: 300 })
    const b = createLease(redis, key, { ttlMs: 300 })
    env.defer(() => a.release())
    env.defer(() => b.release())

    expect(await a.tryAcquire()).toBe(true)
    expect(await b.tryAcquire()).toBe(false)
    // Past several ttls, a's renewals keep b out.
    const waiting = new AbortController()
    const bGot = b.acquire(waiting.signal)
    // Past more than two ttls (eight renewals seen as the key's ttl going back up), a holds on.
    let renewals = 0
    let lastTtl = await redis.pttl(key)
    await waitFor(
      'eight renewals',
      async () => {
        const ttl = await redis.pttl(key)
        if (ttl > lastTtl) renewals += 1
        lastTtl = ttl
        return renewals >= 8
      },
      { timeoutMs: 5_000, intervalMs: 5 },
    )
    expect(a.held).toBe(true)
    expect(b.held).toBe(false)
    expect(await redis.get(key)).toBe(a.token)

    // b's release must not free a's lease.
    await b.release()
    expect(await redis.get(key)).toBe(a.token)

    await a.release()
    expect(await bGot).toBe(true)
    expect(b.held).toBe(true)
    expect(await redis.get(key)).toBe(b.token)
    waiting.abort()
  })

  it('reports the loss when another holder has taken the key', async () => {
    const redis = createRedis(env.redisUrl, 'producer', 'lease-test-2')
    env.defer(() => closeRedis(redis))
    const key = `${env.prefix}:lease-lost`
    const a = createLease(redis, key, { ttlMs: 300 })
    env.defer(() => a.release())
    let lost = false
    a.onLost(() => (lost = true))
    expect(await a.tryAcquire()).toBe(true)
    await redis.set(key, 'someone-else')
    await waitFor('the loss reported', () => lost, { timeoutMs: 2_000 })
    expect(a.held).toBe(false)
    await a.release()
    expect(await redis.get(key)).toBe('someone-else')
  })
})

describe('listen', () => {
  it('delivers NOTIFYs and keeps listening after its backend is terminated', async () => {
    const payloads: string[] = []
    let listening = 0
    const listener = listen({
      url: env.databaseUrl,
      channel: RULES_CHANNEL,
      applicationName: `${env.schema}-listen`,
      retryMs: 20,
      onNotify: (p) => payloads.push(p),
      onListening: () => (listening += 1),
    })
    env.defer(() => listener.close())
    await listener.ready
    await sql`SELECT pg_notify(${RULES_CHANNEL}, 'one')`.execute(env.db)
    await waitFor('the first notification', () => payloads.includes('one'))

    expect(await terminateConnections(env.databaseUrl, `${env.schema}-listen`)).toBe(1)
    await waitFor('listening again', () => listening === 2)
    await sql`SELECT pg_notify(${RULES_CHANNEL}, 'two')`.execute(env.db)
    await waitFor('a notification after the reconnect', () => payloads.includes('two'))
  })
})
