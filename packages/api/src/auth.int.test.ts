import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import type { ApiServer } from './server.js'
import { startTestServer } from '@threadline/testing/api'

/** No lockout a stranger can cause (docs/api.md §1.1). */
let env: TestEnv
let server: ApiServer

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server } = await startTestServer(env, {
    tokenCacheMs: 60_000,
    trustedProxies: ['10.77.0.1', '10.78.0.0/16'],
  }))
})
afterAll(() => env?.close())

const wellFormed = () => randomBytes(32).toString('base64url')
const request = (token: string, remoteAddress: string, forwardedFor?: string) =>
  server.app.inject({
    method: 'GET',
    url: '/2/tweets?ids=1',
    headers: {
      authorization: `Bearer ${token}`,
      ...(forwardedFor ? { 'x-forwarded-for': forwardedFor } : {}),
    },
    remoteAddress,
  })

describe('a flood of unknown tokens from one address', () => {
  it('never refuses a new valid token from it, and bounds the lookups a second', async () => {
    const before = server.tokenLookups()
    const started = performance.now()
    const validAnswers: number[] = []
    let floodAnswers = 0
    for (let wave = 0; wave < 12; wave++) {
      // An app's first request (its token not cached) amid 100 unknown tokens and garbage.
      const fresh = await createApp(env.db, `fresh-${wave}`)
      const [valid, ...flood] = await Promise.all([
        request(fresh.bearer_token, '10.60.0.1'),
        ...Array.from({ length: 80 }, () => request(wellFormed(), '10.60.0.1')),
        ...Array.from({ length: 20 }, (_, i) => request(`garbage-${wave}-${i}`, '10.60.0.1')),
      ])
      validAnswers.push(valid!.statusCode)
      floodAnswers += flood.length
      expect(new Set(flood.map((r) => r.statusCode))).not.toContain(200)
    }
    const seconds = (performance.now() - started) / 1000
    const after = server.tokenLookups()
    const queries = after.queries - before.queries
    const tokens = after.tokens - before.tokens
    expect(floodAnswers).toBeGreaterThanOrEqual(1_200)
    expect(validAnswers).toEqual(validAnswers.map(() => 200))
    // Every well-formed token was looked up (it might have been valid), on few queries: at most
    // 20 started a second (the bound), however long the loaded machine took.
    expect(tokens).toBe(12 * 81)
    expect(queries).toBeLessThanOrEqual(Math.ceil(seconds * 20) + 1)
    expect(queries).toBeLessThan(tokens / 10)
  })

  it('remembers an unknown token: asked again, it costs no lookup', async () => {
    const token = wellFormed()
    expect((await request(token, '10.61.0.1')).statusCode).toBe(401)
    const before = server.tokenLookups()
    expect((await request(token, '10.61.0.1')).statusCode).toBe(401)
    expect(server.tokenLookups()).toEqual(before)
  })

  it('refuses a token of the wrong shape without a lookup', async () => {
    const before = server.tokenLookups()
    for (const garbage of ['x', 'a'.repeat(42), 'a'.repeat(44), `${'a'.repeat(42)}!`]) {
      expect((await request(garbage, '10.62.0.1')).statusCode).toBe(401)
    }
    expect(server.tokenLookups()).toEqual(before)
  })
})

describe('API_TRUSTED_PROXIES', () => {
  const spend = async (remoteAddress: string, forwardedFor: (i: number) => string | undefined) => {
    const statuses = new Set<number>()
    for (let i = 0; i < 320; i++) {
      statuses.add((await request(`bad-${i}`, remoteAddress, forwardedFor(i))).statusCode)
    }
    return [...statuses].sort()
  }

  it('behind a trusted proxy, the budget counts the client named in X-Forwarded-For', async () => {
    expect(await spend('10.77.0.1', () => '203.0.113.5')).toEqual([401, 429])
    // Another client behind the same proxy has its own budget.
    expect((await request('bad', '10.77.0.1', '203.0.113.6')).statusCode).toBe(401)
    // The same client through two trusted hops of a range: the nearest untrusted hop is the client.
    expect((await request('bad', '10.78.3.4', '203.0.113.5, 10.78.9.9')).statusCode).toBe(429)
  })

  it('from an untrusted peer, X-Forwarded-For is ignored', async () => {
    expect(await spend('10.79.0.1', (i) => `203.0.113.${i % 200}`)).toEqual([401, 429])
    expect((await request('bad', '10.79.0.1', '203.0.113.250')).statusCode).toBe(429)
  })
})
