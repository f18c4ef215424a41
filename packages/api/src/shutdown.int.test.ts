import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '@threadline/config'
import { addRules, createApp } from '@threadline/db'
import { withDeadline } from '@threadline/runtime'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import { createApi } from './api.js'
import { apiDepsFromConfig, apiOptionsFromConfig } from './from-config.js'
import { assertXSchema, storeLines } from '@threadline/testing/api'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('the API with Redis down since the start', () => {
  it('listens and answers from Postgres, refuses the filtered stream with 503, and stops promptly', async () => {
    const conv = generateConversation({ size: 3, seed: 11, startMs: Date.now() - 60_000 })
    await storeLines(env.db, conv.lines)
    const { app_id: appId, bearer_token: token } = await createApp(env.db, 'redis-down app')
    await addRules(env.db, appId, [{ value: `conversation_id:${conv.rootId}` }], { cap: 10 })
    // Nothing listens on port 1. The filtered stream's hub waits for the stored stream's tail
    // there; the rest of the API must not wait with it (it did: nothing listened until Redis
    // answered, so lookups that need only Postgres were down too).
    const config = loadConfig({ ...env.env, REDIS_URL: 'redis://127.0.0.1:1', PORT: '0' })
    const server = createApi(
      await apiDepsFromConfig(config, env.logger),
      apiOptionsFromConfig(config),
    )
    try {
      await withDeadline(5_000, 'api start', () => server.start())
      const get = (path: string) =>
        fetch(`${server.url()}${path}`, { headers: { authorization: `Bearer ${token}` } })

      // A lookup: Postgres only (the rate limiter lets the request through without Redis).
      const lookup = await get(`/2/tweets?ids=${conv.ids.join(',')}`)
      expect(lookup.status).toBe(200)
      const found = (await lookup.json()) as { data: Array<{ id: string }> }
      assertXSchema('Get2TweetsResponse', found)
      expect(found.data.map((p) => p.id).sort()).toEqual([...conv.ids].sort())

      // The filtered stream needs the hub: a 503 in X's problem shape, not a request left hanging.
      const stream = await get('/2/tweets/search/stream')
      expect(stream.status).toBe(503)
      expect(await stream.json()).toMatchObject({ title: 'Service Unavailable', status: 503 })

      const ready = await get('/ready')
      expect(ready.status).toBe(503)
    } finally {
      // Fastify's close waits for the start's onReady hooks: the hub's wait must not hold it.
      await withDeadline(8_000, 'api close', () => server.close())
    }
    expect(server.app.server.listening).toBe(false)
  })
})
