import { randomBytes } from 'node:crypto'
import { connect } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp, hashToken } from '@threadline/db'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { createPageTokens } from './page-token.js'
import type { ApiServer } from './server.js'
import { startTestServer } from '@threadline/testing/api'

/** Hostile input answered with X's 400s and bounded work (docs/api.md §1.2). */
let env: TestEnv
let server: ApiServer
let token: string
let url: string

const SECRET = 'test-secret'
const forge = createPageTokens(SECRET)

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token, url } = await startTestServer(
    env,
    { ruleCap: 5_000, tokenSecret: SECRET, tokenCacheMs: 60_000, requestTimeoutMs: 1_000 },
    { listen: true },
  ))
})
afterAll(() => env?.close())

const auth = (t = token) => ({ authorization: `Bearer ${t}` })
const get = (path: string, t = token) =>
  server.app.inject({ method: 'GET', url: path, headers: auth(t) })
const send = (method: 'POST' | 'PUT', path: string, payload: string) =>
  server.app.inject({
    method,
    url: path,
    headers: { ...auth(), 'content-type': 'application/json' },
    payload,
  })

function expect400(res: { statusCode: number; json(): unknown }) {
  expect(res.statusCode, JSON.stringify(res.json()).slice(0, 500)).toBe(400)
  const body = res.json() as { errors?: unknown[]; title?: string }
  expect(Array.isArray(body.errors)).toBe(true)
  expect(body.title).toBe('Invalid Request')
}

describe('pagination tokens', () => {
  const countsScope = (kind: string, query: string, granularity: string) =>
    [`counts/${kind}`, query, '', '', '', '', granularity].join('\n')

  it('a counts token whose position is outside the window is refused', async () => {
    const year = 365 * 86_400_000
    for (const [kind, position] of [
      ['all', String(Date.now() + year)],
      ['all', '253402300800000'],
      ['all', '0'],
      ['recent', String(Date.now() - year)],
    ] as const) {
      const t = forge.encode(countsScope(kind, 'coffee', 'minute'), position)
      const res = await get(
        `/2/tweets/counts/${kind}?query=coffee&granularity=minute&next_token=${t}`,
      )
      expect400(res)
      expect(JSON.stringify(res.json())).toContain('is not a valid token for this request')
    }
  })

  it('a counts page holds a bounded number of buckets, whatever the window', async () => {
    const res = await get(
      '/2/tweets/counts/all?query=coffee&granularity=minute&start_time=2020-01-01T00:00:00Z',
    )
    expect(res.statusCode).toBe(200)
    const body = res.json() as { data: unknown[]; meta: { next_token?: string } }
    expect(body.data.length).toBeLessThanOrEqual(10_081)
    expect(body.meta.next_token).toBeDefined()
    const next = await get(
      `/2/tweets/counts/all?query=coffee&granularity=minute&start_time=2020-01-01T00:00:00Z&next_token=${body.meta.next_token}`,
    )
    expect(next.statusCode).toBe(200)
    expect((next.json() as { data: unknown[] }).data.length).toBeLessThanOrEqual(10_081)
  })
})

describe('characters Postgres refuses', () => {
  it('NUL in rule values, tags and deletes by value is a 400', async () => {
    expect400(
      await send('POST', '/2/tweets/search/stream/rules', '{"add":[{"value":"coffee\\u0000"}]}'),
    )
    expect400(
      await send(
        'POST',
        '/2/tweets/search/stream/rules',
        '{"add":[{"value":"coffee","tag":"\\u0000"}]}',
      ),
    )
    expect400(
      await send(
        'POST',
        '/2/tweets/search/stream/rules?dry_run=true',
        '{"delete":{"values":["\\u0000"]}}',
      ),
    )
    expect400(
      await send('POST', '/2/tweets/search/stream/rules', '{"delete":{"values":["x\\u0000y"]}}'),
    )
  })

  it('NUL in subscription keyword and tag, and in a query parameter, is a 400', async () => {
    expect400(
      await send(
        'POST',
        '/2/activity/subscriptions',
        '{"event_type":"post.create","filter":{"keyword":"coffee\\u0000"}}',
      ),
    )
    expect400(
      await send(
        'POST',
        '/2/activity/subscriptions',
        '{"event_type":"post.create","filter":{"keyword":"coffee"},"tag":"\\u0000"}',
      ),
    )
    expect400(await get('/2/tweets/search/recent?query=coffee%00b'))
    expect400(await get('/2/tweets/counts/recent?query=%22coffee%00%22'))
  })

  it('an escaped backslash before u0000 is text, not NUL', async () => {
    const res = await send(
      'POST',
      '/2/tweets/search/stream/rules?dry_run=true',
      '{"add":[{"value":"coffee","tag":"\\\\u0000"}]}',
    )
    expect(res.statusCode).toBe(201)
  })
})

describe('nesting', () => {
  const deep = (n: number) => '['.repeat(n) + ']'.repeat(n)

  it('deeply nested bodies are a 400 on every route that reads one', async () => {
    expect400(
      await send(
        'POST',
        '/2/activity/subscriptions',
        `{"event_type":"post.create","filter":${deep(5_000)}}`,
      ),
    )
    expect400(await send('POST', '/2/webhooks', `{"url":${deep(5_000)}}`))
    expect400(await send('PUT', `/2/activity/subscriptions/1`, `{"tag":${deep(5_000)}}`))
    expect400(await send('POST', '/2/tweets/search/stream/rules', `{"add":${deep(100)}}`))
  })
})

describe('work one request may ask', () => {
  it('deleting more rule ids than a request may hold is a 400, not an outage', async () => {
    const ids = Array.from({ length: 70_000 }, (_, i) => String(i + 1))
    expect400(
      await send('POST', '/2/tweets/search/stream/rules', JSON.stringify({ delete: { ids } })),
    )
    const values = Array.from({ length: 1_001 }, (_, i) => `v${i}`)
    expect400(
      await send('POST', '/2/tweets/search/stream/rules', JSON.stringify({ delete: { values } })),
    )
  })

  it('adding more rules than a request may hold is a 400, whatever the app cap', async () => {
    const add = Array.from({ length: 1_001 }, (_, i) => ({ value: `v${i}` }))
    expect400(
      await send('POST', '/2/tweets/search/stream/rules?dry_run=true', JSON.stringify({ add })),
    )
  })
})

describe('bearer tokens', () => {
  it('an unknown token is remembered as unknown', async () => {
    const garbage = randomBytes(32).toString('base64url')
    expect((await get('/2/tweets?ids=1', garbage)).statusCode).toBe(401)
    // The token becomes valid in the database; the cached "unknown" still answers.
    const created = await createApp(env.db, 'late')
    await env.db
      .updateTable('api_tokens')
      .set({ token_hash: hashToken(garbage) })
      .where('app_id', '=', created.app_id)
      .execute()
    expect((await get('/2/tweets?ids=1', garbage)).statusCode).toBe(401)
  })

  it('garbage tokens from many addresses cannot flush the known ones', async () => {
    const known = await createApp(env.db, 'known')
    expect((await get('/2/tweets?ids=1', known.bearer_token)).statusCode).toBe(200)
    // Revoked in the database: only the cache still knows it, for its cache period.
    await env.db
      .updateTable('api_tokens')
      .set({ revoked_at: new Date() })
      .where('app_id', '=', known.app_id)
      .execute()
    const garbage = (i: number) =>
      server.app.inject({
        method: 'GET',
        url: '/2/tweets?ids=1',
        headers: auth(`g${i}`),
        remoteAddress: `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`,
      })
    for (let i = 0; i < 10_050; i += 50) {
      const answers = await Promise.all(Array.from({ length: 50 }, (_, j) => garbage(i + j)))
      expect(answers.map((a) => a.statusCode)).toEqual(answers.map(() => 401))
    }
    expect((await get('/2/tweets?ids=1', known.bearer_token)).statusCode).toBe(200)
  })

  it('an address sending unauthenticated requests is limited', async () => {
    const statuses = new Set<number>()
    for (let i = 0; i < 400; i++) {
      const res = await server.app.inject({
        method: 'GET',
        url: '/2/tweets?ids=1',
        headers: auth(`flood-${i}`),
        remoteAddress: '10.200.0.1',
      })
      statuses.add(res.statusCode)
    }
    expect([...statuses].sort()).toEqual([401, 429])
  })

  it('a client known before is not locked out by garbage from its address', async () => {
    const known = await createApp(env.db, 'neighbour')
    // Every lookup expires at once: the known token is looked up again each time, and is not
    // refused along with the garbage.
    const again = await startTestServer(env, { tokenSecret: SECRET, tokenCacheMs: 0 })
    const via = (t: string) =>
      again.server.app.inject({
        method: 'GET',
        url: '/2/tweets?ids=1',
        headers: auth(t),
        remoteAddress: '10.201.0.2',
      })
    expect((await via(known.bearer_token)).statusCode).toBe(200)
    for (let i = 0; i < 400; i++) await via(`flood-${i}`)
    expect((await via('one-more')).statusCode).toBe(429)
    expect((await via(known.bearer_token)).statusCode).toBe(200)
  })
})

describe('slow clients', () => {
  it('a request body that does not arrive in time is cut', async () => {
    const { hostname, port } = new URL(url)
    const socket = connect(Number(port), hostname)
    let closed = false
    let answer = ''
    socket.on('data', (d: Buffer) => (answer += d.toString()))
    socket.on('close', () => (closed = true))
    socket.on('error', () => {})
    socket.write(
      'POST /2/tweets/search/stream/rules HTTP/1.1\r\nHost: x\r\n' +
        `Authorization: Bearer ${token}\r\ncontent-type: application/json\r\n` +
        'Content-Length: 1000\r\n\r\n{',
    )
    await waitFor('the server to cut the slow body', () => closed, { timeoutMs: 15_000 })
    expect(answer).toMatch(/^HTTP\/1.1 408/)
  })
})
