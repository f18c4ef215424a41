import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp, ensureBackfills, updateBackfill } from '@threadline/db'
import { formatPostTime } from '@threadline/domain'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '@threadline/api'
import { startTestServer } from '@threadline/testing/api'
import { startTestWriter } from '../support/writer.js'
import { conversationFixture, type GenPost } from './fixture.js'
import { postsQueue, storedCount } from './harness.js'

/**
 * GET /2/conversations (docs/api.md §5): the conversations an app's `conversation_id:` rules
 * follow, as Posts are stored by the real writer and backfill states change (through the
 * repository functions the ingest's backfill runner calls).
 */
let env: TestEnv
let server: ApiServer
let token: string
let send: ReturnType<typeof postsQueue>['send']

// Three conversations, a day apart: `one` is stored with its root, `two` without, `three` never.
const one = conversationFixture(1, Date.UTC(2026, 10, 10))
const two = conversationFixture(2, Date.UTC(2026, 10, 11))
const three = conversationFixture(3, Date.UTC(2026, 10, 12))
const other = conversationFixture(4, Date.UTC(2026, 10, 13))

const get = (url: string, bearer = token) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${bearer}` } })

async function addRule(value: string, bearer = token): Promise<string> {
  const res = await server.app.inject({
    method: 'POST',
    url: '/2/tweets/search/stream/rules',
    headers: { authorization: `Bearer ${bearer}`, 'content-type': 'application/json' },
    payload: JSON.stringify({ add: [{ value }] }),
  })
  expect(res.statusCode, res.body).toBe(201)
  return res.json().data[0].id
}

type Item = {
  id: string
  rule_ids: string[]
  post_count: number
  reply_count: number
  reported_reply_count?: number
  root_author_id?: string
  first_created_at?: string
  last_created_at?: string
  backfill: { state: string; source: string; error?: string }
}
const list = async (query = '', bearer = token) => {
  const res = await get(`/2/conversations${query}`, bearer)
  expect(res.statusCode, res.body).toBe(200)
  return res.json<{ data?: Item[]; meta: { result_count: number; next_token?: string } }>()
}

const ruleIds = new Map<string, string[]>()

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
  await startTestWriter(env)
  send = postsQueue(env).send
  // One rule at a time, so that the later rule has the greater id.
  for (const c of [one, two, three])
    ruleIds.set(c.rootId, [await addRule(`conversation_id:${c.rootId}`)])
  // A second rule naming `one` (another spelling), and rules that name no conversation alone.
  ruleIds.get(one.rootId)!.push(await addRule(` conversation_id:${one.rootId}`))
  await addRule(`conversation_id:${two.rootId} lang:en`)
  await addRule('from:someone')
})
afterAll(() => env?.close())

const stored = (fx: ReturnType<typeof conversationFixture>, withRoot: boolean): GenPost[] =>
  fx.posts.filter((p) => p.id !== fx.missingId && (withRoot || p.id !== fx.rootId))

describe('GET /2/conversations', () => {
  it('lists followed conversations with nothing stored first, newest rule first, all pending', async () => {
    const body = await list()
    expect(body.meta).toEqual({ result_count: 3 })
    // `one` has the newest rule (its second one).
    expect(body.data).toEqual(
      [one, three, two].map((c) => ({
        id: c.rootId,
        rule_ids: ruleIds.get(c.rootId),
        post_count: 0,
        reply_count: 0,
        backfill: { state: 'pending', source: 'recent' },
      })),
    )
  })

  it('orders by newest activity once Posts are stored, with the root figures when the root is', async () => {
    const oneStored = stored(one, true)
    const twoStored = stored(two, false)
    await send([...oneStored, ...twoStored])
    await waitFor(
      'both stored',
      async () =>
        (await storedCount(env, one.rootId)) === oneStored.length &&
        (await storedCount(env, two.rootId)) === twoStored.length,
    )
    const body = await list()
    expect(body.data!.map((c) => c.id)).toEqual([three.rootId, two.rootId, one.rootId])
    const [, second, third] = body.data!
    const times = (posts: GenPost[]) => posts.map((p) => p.ms)
    expect(third).toEqual({
      id: one.rootId,
      rule_ids: ruleIds.get(one.rootId),
      post_count: oneStored.length,
      reply_count: oneStored.length - 1,
      reported_reply_count: one.posts[0]!.replyCount,
      root_author_id: one.posts[0]!.author,
      first_created_at: formatPostTime(new Date(Math.min(...times(oneStored)))),
      last_created_at: formatPostTime(new Date(Math.max(...times(oneStored)))),
      backfill: { state: 'pending', source: 'recent' },
    })
    expect(second).toEqual({
      id: two.rootId,
      rule_ids: ruleIds.get(two.rootId),
      post_count: twoStored.length,
      reply_count: twoStored.length,
      first_created_at: formatPostTime(new Date(Math.min(...times(twoStored)))),
      last_created_at: formatPostTime(new Date(Math.max(...times(twoStored)))),
      backfill: { state: 'pending', source: 'recent' },
    })
  })

  it('shows backfill states as they change', async () => {
    const backfillOf = async (id: string) => (await list()).data!.find((c) => c.id === id)!.backfill
    await ensureBackfills(env.db, [one.rootId, two.rootId, three.rootId])
    expect(await backfillOf(one.rootId)).toEqual({ state: 'pending', source: 'recent' })
    await updateBackfill(env.db, one.rootId, { kind: 'running', source: 'all' })
    expect(await backfillOf(one.rootId)).toEqual({ state: 'running', source: 'all' })
    await updateBackfill(env.db, one.rootId, { kind: 'page', nextToken: null, posts: 10 })
    await updateBackfill(env.db, one.rootId, { kind: 'done' })
    expect(await backfillOf(one.rootId)).toEqual({ state: 'done', source: 'all' })
    await updateBackfill(env.db, two.rootId, { kind: 'running', source: 'recent' })
    await updateBackfill(env.db, two.rootId, { kind: 'failed', error: 'upstream answered 503' })
    expect(await backfillOf(two.rootId)).toEqual({
      state: 'failed',
      source: 'recent',
      error: 'upstream answered 503',
    })
    expect(await backfillOf(three.rootId)).toEqual({ state: 'pending', source: 'recent' })
  })

  it('pages with tokens bound to the app', async () => {
    const all = (await list()).data!.map((c) => c.id)
    const seen: string[] = []
    let next: string | undefined
    do {
      const body = await list(`?max_results=1${next ? `&pagination_token=${next}` : ''}`)
      expect(body.meta.result_count).toBe(1)
      seen.push(...body.data!.map((c) => c.id))
      next = body.meta.next_token
    } while (next)
    expect(seen).toEqual(all)

    const first = await list('?max_results=2')
    const otherApp = await createApp(env.db, 'other app')
    for (const url of [
      `/2/conversations?pagination_token=${first.meta.next_token}`,
      '/2/conversations?max_results=0',
      '/2/conversations?max_results=101',
      '/2/conversations?pagination_token=nonsense',
    ]) {
      const res = await get(url, otherApp.bearer_token)
      expect(res.statusCode, url).toBe(400)
      expect(res.json()).toMatchObject({
        title: 'Invalid Request',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      })
    }
  })

  it('shows an app only its own rules, and nothing for an app without such rules', async () => {
    const b = await createApp(env.db, 'app b')
    expect(await list('', b.bearer_token)).toEqual({ meta: { result_count: 0 } })
    await addRule(`conversation_id:${other.rootId}`, b.bearer_token)
    expect((await list('', b.bearer_token)).data!.map((c) => c.id)).toEqual([other.rootId])
    expect((await list()).data!.map((c) => c.id)).not.toContain(other.rootId)
  })
})
