import net from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, waitFor, waitForValue, type TestEnv } from '@threadline/testing'
import type { Writer } from '@threadline/writer'
import type { StreamConnection } from '../../packages/api/src/stream/index.js'
import { assertXSchema } from '@threadline/testing/api'
import {
  appWithRules,
  openRawStream,
  postLine,
  startStreamServer,
  startWriter,
  store,
  type RawStream,
  type StreamServer,
} from './harness.js'

/**
 * The filtered stream end to end: the writer stores Posts and relays them to `stored`; the API's
 * hub matches them against connected apps' rules and writes them to raw HTTP readers.
 */
let env: TestEnv
let api: StreamServer
let writer: Writer
const alice = { id: '2001', username: 'alice_s', name: 'Alice' }
const bob = { id: '2002', username: 'bob_s', name: 'Bob' }
const carol = { id: '2003', username: 'carol_s', name: 'Carol' }

beforeAll(async () => {
  env = await createTestEnv()
  api = await startStreamServer(env, { keepAliveMs: 150 })
  writer = await startWriter(env)
})
afterAll(() => env?.close())

const ids = (s: RawStream) => s.messages.map((m) => (m.data as { id: string }).id)

describe('GET /2/tweets/search/stream', () => {
  it('delivers exactly the matching Posts once per app, with matching_rules, fields and includes', async () => {
    const a = await appWithRules(env, 'app a', [
      { value: '#alpha', tag: 'alpha posts' },
      { value: 'from:bob_s' },
    ])
    const b = await appWithRules(env, 'app b', [{ value: '#beta', tag: 'b' }])
    const query =
      'tweet.fields=created_at,author_id,public_metrics&expansions=author_id,referenced_tweets.id&user.fields=username'
    const sa = await openRawStream(api.url, a.token, query, env)
    const sb = await openRawStream(api.url, b.token, '', env)
    expect(sa.status).toBe(200)
    expect(sa.headers['content-type']).toBe('application/json; charset=utf-8')

    const p1 = postLine({ text: 'hello #alpha world', author: alice })
    const p2 = postLine({ text: 'more #alpha from bob', author: bob })
    const p3 = postLine({ text: 'only #beta here', author: carol })
    const p4 = postLine({ text: 'nothing to see', author: carol })
    const p5 = postLine({
      text: 'a reply by bob',
      author: bob,
      replyTo: { id: p1.id, author: alice },
    })
    await store(env, writer, [p1.line, p2.line, p3.line, p4.line])
    await store(env, writer, [p5.line])
    const last = postLine({ text: 'sentinel #alpha #beta', author: carol })
    await store(env, writer, [last.line])

    await waitFor('app a gets the sentinel', () => ids(sa).includes(last.id))
    await waitFor('app b gets the sentinel', () => ids(sb).includes(last.id))
    expect(ids(sa)).toEqual([p1.id, p2.id, p5.id, last.id])
    expect(ids(sb)).toEqual([p3.id, last.id])
    expect(sa.badFraming).toEqual([])

    const alpha = a.ruleIds.get('#alpha')!
    const fromBob = a.ruleIds.get('from:bob_s')!
    const [m1, m2, m5] = sa.messages
    for (const m of sa.messages) assertXSchema('FilteredStreamingTweetResponse', m)
    expect(m1!.matching_rules).toEqual([{ id: alpha, tag: 'alpha posts' }])
    expect(
      (m2!.matching_rules as Array<{ id: string }>).sort((x, y) => x.id.localeCompare(y.id)),
    ).toEqual(
      [
        { id: alpha, tag: 'alpha posts' },
        { id: fromBob, tag: '' },
      ].sort((x, y) => x.id.localeCompare(y.id)),
    )
    expect(m5!.matching_rules).toEqual([{ id: fromBob, tag: '' }])
    const d1 = m1!.data as Record<string, unknown>
    expect(Object.keys(d1).sort()).toEqual([
      'author_id',
      'created_at',
      'id',
      'public_metrics',
      'text',
    ])
    expect(d1.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(m1!.includes).toEqual({ users: [{ id: alice.id, name: 'Alice', username: 'alice_s' }] })
    // The reply: its author and the Post it replies to are included.
    const inc5 = m5!.includes as { users: Array<{ id: string }>; tweets: Array<{ id: string }> }
    expect(inc5.users.map((u) => u.id)).toEqual([bob.id])
    expect(inc5.tweets.map((t) => t.id)).toEqual([p1.id])
    expect((m5!.data as { referenced_tweets: unknown }).referenced_tweets).toEqual([
      { type: 'replied_to', id: p1.id },
    ])
    // No field selection: id and text only, no includes.
    expect(sb.messages[0]).toEqual({
      data: { id: p3.id, text: 'only #beta here' },
      matching_rules: [{ id: b.ruleIds.get('#beta'), tag: 'b' }],
    })
    sa.close()
    sb.close()
  })

  it('applies a rule added while connected, without reconnecting', async () => {
    const a = await appWithRules(env, 'app live', [{ value: '#first' }])
    const s = await openRawStream(api.url, a.token, '', env)
    const res = await fetch(`${api.url}/2/tweets/search/stream/rules`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ add: [{ value: '#second', tag: 'new' }] }),
    })
    expect(res.status).toBe(201)
    const added = ((await res.json()) as { data: Array<{ id: string }> }).data[0]!.id
    // Rule changes travel by LISTEN/NOTIFY; they must land within a second.
    await waitFor('the new rule in the hub', () => api.stream.hub.ruleCount(a.appId) === 2, {
      timeoutMs: 1_000,
      intervalMs: 10,
    })
    const p = postLine({ text: 'now #second matches', author: alice })
    await store(env, writer, [p.line])
    await waitFor('the Post matched by the new rule', () => s.messages.length === 1)
    expect(s.messages[0]!.matching_rules).toEqual([{ id: added, tag: 'new' }])

    // And a deleted rule stops matching.
    await fetch(`${api.url}/2/tweets/search/stream/rules`, {
      method: 'POST',
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/json' },
      body: JSON.stringify({ delete: { ids: [added] } }),
    })
    await waitFor('the rule removed', () => api.stream.hub.ruleCount(a.appId) === 1, {
      timeoutMs: 1_000,
      intervalMs: 10,
    })
    const gone = postLine({ text: 'no longer #second', author: alice })
    const first = postLine({ text: 'still #first', author: alice })
    await store(env, writer, [gone.line, first.line])
    await waitFor('the #first Post', () => s.messages.length === 2)
    expect(ids(s)).toEqual([p.id, first.id])
    s.close()
  })

  it('answers 409 without rules and 429 past the connection limit', async () => {
    const none = await appWithRules(env, 'no rules', [])
    const r409 = await openRawStream(api.url, none.token, '', env)
    await waitFor('409 body', () => r409.ended)
    expect(r409.status).toBe(409)
    expect(JSON.parse(r409.body)).toEqual({
      title: 'ConnectionException',
      detail:
        'You must define rules using the POST /2/tweets/search/stream/rules endpoint before connecting to filtered stream.',
      connection_issue: 'RuleConfigurationIssue',
      type: 'https://api.twitter.com/2/problems/streaming-connection',
    })

    const a = await appWithRules(env, 'one conn', [{ value: '#x' }])
    const first = await openRawStream(api.url, a.token, '', env)
    expect(first.status).toBe(200)
    const second = await openRawStream(api.url, a.token, '', env)
    await waitFor('429 body', () => second.ended)
    expect(second.status).toBe(429)
    expect(JSON.parse(second.body)).toMatchObject({
      title: 'ConnectionException',
      connection_issue: 'TooManyConnections',
      type: 'https://api.twitter.com/2/problems/streaming-connection',
    })
    // The limit is counted across instances: a second API on the same Redis refuses too.
    const other = await startStreamServer(env, { keepAliveMs: 150 })
    const elsewhere = await openRawStream(other.url, a.token, '', env)
    await waitFor('429 from the other instance', () => elsewhere.ended)
    expect(elsewhere.status).toBe(429)
    // Once the first closes, its slot is free again.
    first.close()
    await waitForValue('a reconnect accepted', async () => {
      const again = await openRawStream(other.url, a.token, '', env)
      if (again.status === 200) return again
      again.close()
      return undefined
    })
  })

  it('replays backfill_minutes first, then goes live, in order', async () => {
    const a = await appWithRules(env, 'backfill', [{ value: '#replay' }])
    const old = [1, 2, 3].map((i) => postLine({ text: `old ${i} #replay`, author: carol }))
    await store(env, writer, [
      ...old.map((p) => p.line),
      postLine({ text: 'other', author: carol }).line,
    ])
    const bad = await openRawStream(api.url, a.token, 'backfill_minutes=6', env)
    await waitFor('400 body', () => bad.ended)
    expect(bad.status).toBe(400)
    expect(JSON.parse(bad.body).errors[0].message).toBe(
      'The `backfill_minutes` query parameter value [6] is not between 0 and 5',
    )

    const s = await openRawStream(api.url, a.token, 'backfill_minutes=2', env)
    const live = postLine({ text: 'live #replay', author: carol })
    await store(env, writer, [live.line])
    await waitFor('backfill and live', () => s.messages.length === 4)
    expect(ids(s)).toEqual([...old.map((p) => p.id), live.id])
    s.close()
    // Without backfill, the past is not replayed.
    await waitFor('the slot released', () => api.stream.registry.connections(a.appId).size === 0)
    const plain = await openRawStream(api.url, a.token, '', env)
    const next = postLine({ text: 'next #replay', author: carol })
    await store(env, writer, [next.line])
    await waitFor('the live Post', () => plain.messages.length === 1)
    expect(ids(plain)).toEqual([next.id])
    plain.close()
  })

  it('sends a bare \\r\\n keep-alive when quiet', async () => {
    const a = await appWithRules(env, 'quiet', [{ value: '#silence' }])
    const s = await openRawStream(api.url, a.token, '', env)
    await waitFor('three keep-alives', () => s.keepAlives >= 3)
    expect(s.messages).toEqual([])
    expect(s.badFraming).toEqual([])
    s.close()
  })
})

describe('slow readers and shutdown', () => {
  it('cuts off a reader that does not read, and keeps its buffer bounded', async () => {
    const bound = 256 * 1024
    const local = await startStreamServer(env, {
      maxBufferedBytes: bound,
      connectionScope: 'instance',
    })
    const a = await appWithRules(env, 'slow', [{ value: '#flood' }])
    let conn: StreamConnection | undefined
    local.stream.registry.onOpen((c) => (conn = c))
    // A raw socket that stops reading after the headers.
    const socket = net.connect(Number(new URL(local.url).port), '127.0.0.1')
    env.defer(() => socket.destroy())
    let received = ''
    socket.setEncoding('utf8')
    socket.on('data', (d: string) => {
      received += d
      if (received.includes('\r\n\r\n') && !socket.isPaused()) socket.pause()
    })
    socket.write(
      `GET /2/tweets/search/stream HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.token}\r\n\r\n`,
    )
    await waitFor('the connection open', () => conn !== undefined)
    const big = 'x'.repeat(20_000)
    let maxBuffered = 0
    const batches: string[][] = []
    for (let i = 0; i < 100; i++) {
      batches.push(
        Array.from(
          { length: 10 },
          (_, j) => postLine({ text: `#flood ${i}-${j} ${big}`, author: alice }).line,
        ),
      )
    }
    for (const lines of batches) {
      if (!conn!.open) break
      await store(env, writer, lines)
      maxBuffered = Math.max(maxBuffered, conn!.buffered)
    }
    const reason = await conn!.closed
    expect(reason).toBe('SlowReader')
    // Bounded: a reader gets 2 s to drain a buffer over the bound, and is cut off at once past
    // four times the bound, so the buffer never holds much more than that plus one batch.
    expect(maxBuffered).toBeLessThan(4 * bound + 10 * 25_000)
    await waitFor('the registry empty', () => local.stream.registry.size === 0)
    expect(received).toContain('HTTP/1.1 200')
  })

  it('tells a slow reader why when it reads again within the grace', async () => {
    const local = await startStreamServer(env, {
      maxBufferedBytes: 64 * 1024,
      connectionScope: 'instance',
    })
    const a = await appWithRules(env, 'slow 2', [{ value: '#flood2' }])
    let conn: StreamConnection | undefined
    local.stream.registry.onOpen((c) => (conn = c))
    const s = await openRawStream(local.url, a.token, '', env)
    s.response.pause()
    await waitFor('the connection open', () => conn !== undefined)
    const big = 'y'.repeat(20_000)
    for (let i = 0; i < 100 && conn!.open; i++) {
      await store(
        env,
        writer,
        Array.from({ length: 10 }, () => postLine({ text: `#flood2 ${big}`, author: alice }).line),
      )
    }
    await waitFor('cut off', () => !conn!.open)
    s.response.resume()
    await waitFor('the stream ended', () => s.ended)
    const lastMessage = s.messages[s.messages.length - 1] as {
      errors?: Array<{ disconnect_type: string; title: string }>
    }
    expect(lastMessage.errors?.[0]).toMatchObject({
      title: 'operational-disconnect',
      disconnect_type: 'SlowReader',
    })
  })

  it('sends OperationalDisconnect to every stream on shutdown and closes', async () => {
    const local = await startStreamServer(env, { connectionScope: 'instance' })
    const a = await appWithRules(env, 'shutdown a', [{ value: '#bye' }])
    const b = await appWithRules(env, 'shutdown b', [{ value: '#bye' }])
    const sa = await openRawStream(local.url, a.token, '', env)
    const sb = await openRawStream(local.url, b.token, '', env)
    await waitFor('both open', () => local.stream.registry.size === 2)
    await local.server.close()
    for (const s of [sa, sb]) {
      await waitFor('the stream ended', () => s.ended)
      expect(s.messages.at(-1)).toEqual({
        errors: [
          {
            title: 'operational-disconnect',
            disconnect_type: 'OperationalDisconnect',
            detail: expect.any(String),
            type: 'https://api.twitter.com/2/problems/operational-disconnect',
          },
        ],
      })
    }
  })
})
