import { afterAll, beforeAll, expect, it } from 'vitest'
import { apiFromConfig } from '@threadline/api'
import { loadConfig } from '@threadline/config'
import { addRules, createApp } from '@threadline/db'
import { createTestEnv, type TestEnv } from '@threadline/testing'

let env: TestEnv
beforeAll(async () => { env = await createTestEnv() })
afterAll(() => env?.close())

it('closes', async () => {
  const config = loadConfig({ ...env.env, PORT: '0', METRICS_PORT: '0' })
  const api = await apiFromConfig(config, env.logger)
  await api.start()
  const app = await createApp(env.db, 'x')
  await addRules(env.db, app.app_id, [{ value: 'hello' }], { cap: 10 })
  const abort = new AbortController()
  const res = await fetch(`${api.url()}/2/tweets/search/stream`, { headers: { authorization: `Bearer ${app.bearer_token}` }, signal: abort.signal })
  expect(res.status).toBe(200)
  await new Promise((r) => setTimeout(r, 300))
  abort.abort()
  await new Promise((r) => setTimeout(r, 300))
  const t = Date.now()
  await api.close()
  console.log('CLOSE', Date.now() - t)
})
