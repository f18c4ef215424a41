import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import type { Writer } from '@threadline/writer'
import { assertXSchema } from '@threadline/testing/api'
import { startApi } from '../support/api.js'
import {
  appWithRules,
  openRawStream,
  postLine,
  replyIn,
  startWriter,
  store,
  type RawStream,
} from '../stream/harness.js'

/**
 * `GET /2/conversations/:id/stream` end to end, as production builds the API (createApi): the
 * writer stores Posts and relays them to `stored`; the hub sends each conversation's Posts to its
 * feeds, with no rule needed.
 */
let env: TestEnv
let api: ApiServer
let writer: Writer
const FEED_LIMIT = 2
const alice = { id: '3001', username: 'alice_f', name: 'Alice' }
const bob = { id: '3002', username: 'bob_f', name: 'Bob' }

beforeAll(async () => {
  env = await createTestEnv({ API_CONVERSATION_STREAM_MAX_CONNECTIONS: String(FEED_LIMIT) })
  api = await startApi(env, { stream: { keepAliveMs: 150, connectionScope: 'cluster' } })
  writer = await startWriter(env)
})
afterAll(() => env?.close())

const ids = (s: RawStream) => s.messages.map((m) => (m.data as { id: string }).id)
const feed = (id: string, token: string, query = '') =>
  openRawStream(api.url(), token, query, env, `/2/conversations/${id}/stream`)

describe('GET /2/conversations/:conversation_id/stream', () => {
  it('sends a new reply of the conversation once, and nothing of another conversation', async () => {
    const { token } = await appWithRules(env, 'no rules', [])
    const root = postLine({ text: 'the root', author: alice })
    const other = postLine({ text: 'another root', author: bob })
    await store(env, writer, [root.line, other.line])

    const s = await feed(
      root.id,
      token,
      'tweet.fields=author_id,conversation_id&expansions=author_id',
    )
    expect(s.status).toBe(200)
    expect(s.headers['content-type']).toBe('application/json; charset=utf-8')
    const reply = postLine({
      text: 'a reply',
      author: bob,
      replyTo: { id: root.id, author: alice },
    })
    const elsewhere = postLine({
      text: 'a reply elsewhere',
      author: alice,
      replyTo: { id: other.id, author: bob },
    })
    // A quote of the root belongs to its own conversation (docs/api.md §5.3).
    const quote = postLine({ text: 'quoting the root', author: alice, quotes: root.id })
    await store(env, writer, [elsewhere.line, reply.line, quote.line])
    const sentinel = replyIn(root.id, {
      text: 'a deeper reply',
      author: alice,
      replyTo: { id: reply.id, author: bob },
    })
    await store(env, writer, [sentinel.line])

    await waitFor('the sentinel reply', () => ids(s).includes(sentinel.id))
    expect(ids(s)).toEqual([reply.id, sentinel.id])
    expect(s.badFraming).toEqual([])
    const [first] = s.messages
    assertXSchema('StreamingTweetResponse', first)
    expect(first).not.toHaveProperty('matching_rules')
    expect(first!.data).toEqual({
      id: reply.id,
      text: 'a reply',
      author_id: bob.id,
      conversation_id: root.id,
    })
    expect(first!.includes.users).toEqual([{ id: bob.id, name: 'Bob', username: 'bob_f' }])
  })

  it('replays the last backfill_minutes first, then goes live', async () => {
    const { token } = await appWithRules(env, 'backfill', [])
    const root = postLine({ text: 'backfill root', author: alice })
    const early = postLine({ text: 'early', author: bob, replyTo: { id: root.id, author: alice } })
    await store(env, writer, [root.line, early.line])

    const live = await feed(root.id, token)
    const replay = await feed(root.id, token, 'backfill_minutes=1')
    const late = postLine({ text: 'late', author: bob, replyTo: { id: root.id, author: alice } })
    await store(env, writer, [late.line])
    await waitFor('the live feed gets the late reply', () => ids(live).includes(late.id))
    await waitFor('the replay gets the late reply', () => ids(replay).includes(late.id))
    expect(ids(live)).toEqual([late.id])
    expect(ids(replay)).toEqual([root.id, early.id, late.id])
    expect(replay.messages[0]).toEqual({ data: { id: root.id, text: 'backfill root' } })
  })

  it('sends keep-alives on a quiet feed', async () => {
    const { token } = await appWithRules(env, 'quiet', [])
    const s = await feed('1', token)
    await waitFor('two keep-alives', () => s.keepAlives >= 2)
    expect(s.messages).toEqual([])
  })

  it('has its own per-app connection limit, apart from the filtered stream', async () => {
    const { token } = await appWithRules(env, 'limited', [{ value: 'limit' }])
    const open = [await feed('11', token), await feed('12', token)]
    for (const s of open) expect(s.status).toBe(200)
    const refused = await feed('13', token)
    expect(refused.status).toBe(429)
    expect(JSON.parse(refused.body)).toEqual({
      title: 'ConnectionException',
      detail: 'This stream is currently at the maximum allowed connection limit.',
      connection_issue: 'TooManyConnections',
      type: 'https://api.twitter.com/2/problems/streaming-connection',
    })
    // The filtered stream's one connection is still free.
    const filtered = await openRawStream(api.url(), token, '', env)
    expect(filtered.status).toBe(200)
    // Another app's feeds are not counted against this one.
    const other = await appWithRules(env, 'other', [])
    expect((await feed('11', other.token)).status).toBe(200)
    // A feed closed by its client frees its slot.
    open[0]!.close()
    await waitFor('a slot freed', async () => (await feed('14', token)).status === 200)
  })

  it('answers bad input with X’s 400', async () => {
    const { token } = await appWithRules(env, 'bad input', [])
    const badId = await feed('12x', token)
    expect(badId.status).toBe(400)
    expect(JSON.parse(badId.body)).toMatchObject({
      title: 'Invalid Request',
      errors: [{ parameters: { conversation_id: ['12x'] } }],
    })
    const badBackfill = await feed('12', token, 'backfill_minutes=6')
    expect(badBackfill.status).toBe(400)
    expect(JSON.parse(badBackfill.body).errors[0].message).toBe(
      'The `backfill_minutes` query parameter value [6] is not between 0 and 5',
    )
    const unknown = await feed('12', token, 'sort=oldest')
    expect(unknown.status).toBe(400)
  })
})
