import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import type { ApiServer } from './server.js'
import { startTestServer } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env, {
    rateLimits: { lookup: 3, search: 3, counts: 3, rules: 3 },
  }))
})
afterAll(() => env?.close())

const get = (url: string, t = token) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${t}` } })

describe('rate limits', () => {
  it('counts per token and endpoint, then answers 429 with the headers', async () => {
    const remaining: string[] = []
    for (let i = 0; i < 3; i++) {
      const res = await get('/2/tweets?ids=1')
      expect(res.statusCode).toBe(200)
      expect(res.headers['x-rate-limit-limit']).toBe('3')
      remaining.push(String(res.headers['x-rate-limit-remaining']))
    }
    expect(remaining).toEqual(['2', '1', '0'])
    const limited = await get('/2/tweets?ids=1')
    expect(limited.statusCode).toBe(429)
    expect(limited.json()).toEqual({
      title: 'Too Many Requests',
      type: 'about:blank',
      status: 429,
      detail: 'Too Many Requests',
    })
    expect(limited.headers['content-type']).toBe('application/json; charset=utf-8')
    const reset = Number(limited.headers['x-rate-limit-reset'])
    expect(reset * 1000).toBeGreaterThan(Date.now())
    expect(reset * 1000).toBeLessThanOrEqual(Date.now() + 15 * 60_000 + 1000)

    // Another endpoint, and another app's token, have their own windows.
    expect((await get('/2/tweets/1')).statusCode).toBe(200)
    const other = await createApp(env.db, 'other')
    expect((await get('/2/tweets?ids=1', other.bearer_token)).statusCode).toBe(200)
  })
})
