import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { createRateLimiter } from './rate-limit.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('createRateLimiter', () => {
  it('sends a burst of increments to Redis together, and replicas share the count', async () => {
    const windowMs = 60_000
    const a = createRateLimiter(env.redis, { prefix: env.prefix, windowMs })
    const other = env.redis.duplicate()
    env.defer(() => other.quit())
    const b = createRateLimiter(other, { prefix: env.prefix, windowMs })
    const now = Date.now()
    // Replica a: its first request waits for Redis, then 49 more are decided locally.
    const first = await a.hit('lookup', 'token-1', 100, now)
    expect(first).toMatchObject({ remaining: 99, allowed: true })
    const burst = await Promise.all(
      Array.from({ length: 49 }, () => a.hit('lookup', 'token-1', 100, now)),
    )
    expect(burst.at(-1)).toMatchObject({ remaining: 50, allowed: true })
    // Every increment reaches Redis (in one or a few INCRBYs, not 49 calls).
    const key = `${env.prefix}:rl:lookup:token-1:${now - (now % windowMs)}`
    await waitFor('the burst counted in Redis', async () => (await env.redis.get(key)) === '50')
    // Replica b starts from the shared count, and its requests count for a as well.
    expect(await b.hit('lookup', 'token-1', 100, now)).toMatchObject({ remaining: 49 })
    for (let i = 0; i < 49; i++) await b.hit('lookup', 'token-1', 100, now)
    await waitFor('both replicas counted', async () => (await env.redis.get(key)) === '100')
    expect(await b.hit('lookup', 'token-1', 100, now)).toMatchObject({
      remaining: 0,
      allowed: false,
    })
  })
})
