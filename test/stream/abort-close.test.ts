import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { appWithRules, startStreamServer, type StreamServer } from './harness.js'

let env: TestEnv
let api: StreamServer
beforeAll(async () => {
  env = await createTestEnv()
  api = await startStreamServer(env, { keepAliveMs: 150 })
})
afterAll(() => env?.close())

describe('API shutdown', () => {
  it('closes promptly after a stream client aborted, with a connection that never sent a request', async () => {
    const app = await appWithRules(env, 'aborting app', [{ value: '#x' }])
    const ctl = new AbortController()
    const res = await fetch(`${api.url}/2/tweets/search/stream`, {
      headers: { authorization: `Bearer ${app.token}` },
      signal: ctl.signal,
    })
    expect(res.status).toBe(200)
    ctl.abort()
    await waitFor('the server to see the stream gone', () => api.stream.registry.size === 0)
    // A pre-connect that never sends a request (clients and load balancers do this).
    const { port } = new URL(api.url)
    const idle = connect({ host: '127.0.0.1', port: Number(port) })
    await new Promise((resolve) => idle.once('connect', resolve))
    const started = Date.now()
    await api.server.close()
    expect(Date.now() - started).toBeLessThan(10_000)
    idle.destroy()
  })
})
