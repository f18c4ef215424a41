import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp, sql } from '@threadline/db'
import { createTestEnv, prng, shuffle, waitFor, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '@threadline/api'
import { assertXSchema, startTestServer } from '@threadline/testing/api'
import { startTestWriter } from '../support/writer.js'
import {
  conversationFixture,
  expectedErrors,
  expectedTree,
  streamLine,
  type ExpectedNode,
  type GenPost,
  type Sort,
} from './fixture.js'
import { postsQueue, storedCount as countIn } from './harness.js'
import { addPostsBatch, createQueue, watchJobs, type PostsJob } from '@threadline/queue'

/**
 * GET /2/conversations/:id (docs/api.md §5) over Posts stored by the real writer from the posts
 * queue, in shuffled batches (replies before their parents), every page of every sort compared with
 * a tree built independently (fixture.ts).
 */
let env: TestEnv
let server: ApiServer
let token: string
let send: ReturnType<typeof postsQueue>['send']
const fx = conversationFixture(35)
const SORTS: Sort[] = ['oldest', 'newest', 'top']

const get = (url: string, bearer = token) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${bearer}` } })

type Page = {
  data?: Array<{ id: string; thread: ExpectedNode['thread'] } & Record<string, unknown>>
  errors?: Array<{ parameter: string; resource_id: string } & Record<string, unknown>>
  meta: Record<string, unknown> & { next_token?: string; result_count: number }
}

const storedCount = (conversationId: string) => countIn(env, conversationId)

/**
 * Waits until the tree served holds `count` Posts: a change is on the pages within the staleness
 * bound of docs/api.md §5, the held tree served meanwhile.
 */
const untilServed = (count: number) =>
  waitFor(`the tree served holds ${count} Posts`, async () => {
    const res = await get(`/2/conversations/${fx.rootId}?max_results=1`)
    return res.json<Page>().meta.post_count === count
  })

/** Every page of a tree, checked one by one against the expected nodes, errors and meta. */
async function checkAllPages(
  stored: readonly GenPost[],
  sort: Sort,
  size: number,
): Promise<string[]> {
  const expected = expectedTree(fx.rootId, stored, sort)
  const seen: string[] = []
  let next: string | undefined
  let pages = 0
  do {
    const url =
      `/2/conversations/${fx.rootId}?sort=${sort}&max_results=${size}` +
      (next ? `&pagination_token=${next}` : '')
    const res = await get(url)
    expect(res.statusCode).toBe(200)
    const body = res.json<Page>()
    const want = expected.nodes.slice(seen.length, seen.length + size)
    expect(body.data!.map((p) => ({ id: p.id, thread: p.thread }))).toEqual(
      want.map((n) => ({ id: n.id, thread: n.thread })),
    )
    const errors = expectedErrors(fx.rootId, expected.rootStored, want, pages === 0)
    expect(
      (body.errors ?? []).map((e) => ({ parameter: e.parameter, resource_id: e.resource_id })),
    ).toEqual(errors)
    const { next_token, result_count, ...meta } = body.meta
    expect(result_count).toBe(want.length)
    expect(meta).toEqual(expected.meta)
    seen.push(...body.data!.map((p) => p.id))
    next = next_token
    pages++
    expect(next === undefined).toBe(seen.length === expected.nodes.length)
  } while (next)
  expect(pages).toBe(Math.ceil(expected.nodes.length / size))
  return seen
}

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
  await startTestWriter(env)
  send = postsQueue(env).send
})
afterAll(() => env?.close())

const withoutLate = () => fx.posts.filter((p) => p.id !== fx.missingId && p.id !== fx.lateId)
const allArrived = () => fx.posts.filter((p) => p.id !== fx.missingId)

describe('GET /2/conversations/:conversation_id', () => {
  it('answers an unknown conversation with only errors', async () => {
    const res = await get(`/2/conversations/${fx.rootId}`)
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    expect(body).toEqual({
      errors: [
        expect.objectContaining({
          resource_id: fx.rootId,
          parameter: 'conversation_id',
          type: 'https://api.twitter.com/2/problems/resource-not-found',
        }),
      ],
    })
  })

  it('keeps orphans while replies arrive before their parents and the root arrives last', async () => {
    // Replies in shuffled batches, the root held back: every reply to it is an orphan meanwhile.
    const replies = shuffle(
      withoutLate().filter((p) => p.id !== fx.rootId),
      prng(1),
    )
    await send([...replies, fx.outsideQuote])
    await waitFor('replies stored', async () => (await storedCount(fx.rootId)) === replies.length)
    await checkAllPages(replies, 'oldest', 100)
    await send([fx.posts[0]!])
    await waitFor('root stored', async () => (await storedCount(fx.rootId)) === replies.length + 1)
    await untilServed(replies.length + 1)
  })

  it('pages every sort at several sizes, each page equal to the independent tree', async () => {
    const stored = withoutLate()
    for (const sort of SORTS) {
      const all = await checkAllPages(stored, sort, 1000)
      expect(new Set(all).size).toBe(stored.length)
      for (const size of sort === 'oldest' ? [1, 37, 100] : [37, 100]) {
        expect(await checkAllPages(stored, sort, size)).toEqual(all)
      }
    }
  })

  it('turns orphans into ordinary children when their late parent arrives', async () => {
    const before = expectedTree(fx.rootId, withoutLate(), 'oldest')
    expect(before.nodes.filter((n) => n.missingParent === fx.lateId).length).toBeGreaterThan(0)
    await send([fx.posts.find((p) => p.id === fx.lateId)!])
    await waitFor(
      'late parent stored',
      async () => (await storedCount(fx.rootId)) === allArrived().length,
    )
    await untilServed(allArrived().length)
    for (const sort of SORTS) await checkAllPages(allArrived(), sort, 250)
    const after = expectedTree(fx.rootId, allArrived(), 'oldest')
    expect(after.nodes.some((n) => n.missingParent === fx.lateId)).toBe(false)
    expect(after.meta.missing_count).toBe(1)
  })

  it('changes nothing when a batch is delivered again', async () => {
    const counters = async () =>
      (
        await sql<{ post_count: number; reply_count: number }>`
          SELECT post_count, reply_count FROM conversations WHERE id = ${fx.rootId}`.execute(env.db)
      ).rows[0]
    const before = await counters()
    expect(before).toEqual({
      post_count: allArrived().length,
      reply_count: allArrived().length - 1,
    })
    // The same lines again, as a job of its own whose end is watched: with several writers a later
    // marker job could be stored before this one commits.
    const queue = createQueue<PostsJob>('posts', {
      connection: env.redis,
      prefix: env.prefix,
      logger: env.logger,
    })
    const watch = await watchJobs(queue, 'posts', env.prefix, env.redis)
    env.defer(async () => {
      await watch.close()
      await queue.close()
    })
    const id = `redelivery-${fx.rootId}`
    const done = watch.done(id)
    const lines = allArrived().slice(0, 40).map(streamLine)
    const batch = { id, firstAttempt: true, source: 'test', lines }
    await addPostsBatch(queue, env.redis, env.prefix, {
      ...batch,
      observed_at: new Date().toISOString(),
    })
    await done
    expect(await queue.getJobState(id), 'the redelivered batch committed').toBe('completed')
    expect(await counters()).toEqual(before)
    await checkAllPages(allArrived(), 'oldest', 1000)
  })

  it('keeps the quote of an outside Post in its own conversation, and a reply that quotes once', async () => {
    const body = (await get(`/2/conversations/${fx.rootId}?max_results=1000`)).json<Page>()
    const ids = body.data!.map((p) => p.id)
    expect(ids).not.toContain(fx.outsideQuote.id)
    for (const p of fx.posts.filter((q) => q.quoted && q.conversationId === fx.rootId)) {
      expect(ids.filter((id) => id === p.id)).toHaveLength(1)
    }
    const own = (await get(`/2/conversations/${fx.outsideQuote.id}`)).json<Page>()
    expect(own.data!.map((p) => p.id)).toEqual([fx.outsideQuote.id])
    expect(own.data![0]!.thread).toEqual({ depth: 0, reply_count: 0, descendant_count: 0 })
  })

  it('returns the fields and expansions asked for, as lookup does', async () => {
    const res = await get(
      `/2/conversations/${fx.rootId}?max_results=20&tweet.fields=created_at,public_metrics,conversation_id&expansions=author_id&user.fields=username`,
    )
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    const expected = expectedTree(fx.rootId, allArrived(), 'oldest').nodes.slice(0, 20)
    expect(body.data.map((p: { id: string }) => p.id)).toEqual(expected.map((n) => n.id))
    for (const [i, p] of body.data.entries()) {
      expect(p.thread).toEqual(expected[i]!.thread)
      expect(p.conversation_id).toBe(fx.rootId)
      expect(p.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
      expect(body.includes.users.map((u: { id: string }) => u.id)).toContain(p.author_id)
    }
    const plain = (await get(`/2/conversations/${fx.rootId}?max_results=3&post.fields=lang`)).json()
    assertXSchema('Get2TweetsResponse', plain)
    expect(Object.keys(plain.data[0]).sort()).toEqual(['id', 'lang', 'text', 'thread'])
  })

  it('answers bad input with X 400 bodies', async () => {
    const first = (await get(`/2/conversations/${fx.rootId}?max_results=5`)).json<Page>()
    const tokenFor = first.meta.next_token!
    const other = await createApp(env.db, 'other app')
    const otherToken = (
      await get(`/2/conversations/${fx.rootId}?max_results=5`, other.bearer_token)
    ).json<Page>().meta.next_token!
    const bad: Array<[string, string, string?]> = [
      ['/2/conversations/abc', 'conversation_id'],
      [`/2/conversations/${fx.rootId}?max_results=0`, 'max_results'],
      [`/2/conversations/${fx.rootId}?max_results=1001`, 'max_results'],
      [`/2/conversations/${fx.rootId}?sort=best`, 'sort'],
      [
        `/2/conversations/${fx.rootId}?sort=newest&pagination_token=${tokenFor}`,
        'pagination_token',
      ],
      [`/2/conversations/${fx.outsideQuote.id}?pagination_token=${tokenFor}`, 'pagination_token'],
      [`/2/conversations/${fx.rootId}?pagination_token=${otherToken}`, 'pagination_token'],
      [`/2/conversations/${fx.rootId}?pagination_token=nonsense`, 'pagination_token'],
      [`/2/conversations/${fx.rootId}?tweet.fields=nope`, 'tweet.fields'],
      [`/2/conversations/${fx.rootId}?colour=blue`, 'colour'],
    ]
    for (const [url, parameter] of bad) {
      const res = await get(url)
      expect(res.statusCode, url).toBe(400)
      const body = res.json()
      expect(body).toMatchObject({
        title: 'Invalid Request',
        detail: 'One or more parameters to your request was invalid.',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      })
      expect(Object.keys(body.errors[0].parameters), url).toEqual([parameter])
    }
    // The same token, on its own request, works.
    expect(
      (await get(`/2/conversations/${fx.rootId}?pagination_token=${tokenFor}`)).statusCode,
    ).toBe(200)
  })

  it('is in the OpenAPI document', async () => {
    const doc = (await server.app.inject({ method: 'GET', url: '/2/openapi.json' })).json()
    const tree = doc.paths['/2/conversations/{conversation_id}'].get
    expect(tree.operationId).toBe('conversation-tree')
    expect(tree.parameters.map((p: { name: string }) => p.name)).toEqual(
      expect.arrayContaining([
        'conversation_id',
        'max_results',
        'pagination_token',
        'sort',
        'tweet.fields',
      ]),
    )
    expect(doc.paths['/2/conversations'].get.operationId).toBe('conversations-list')
  })

  it('follows a growing conversation: every read after the change is served is the tree at the version stored', async () => {
    const stored = [...allArrived()]
    const random = prng(9)
    let ms = Math.max(...stored.map((p) => p.ms))
    let seq = 0n
    const reply = (parent: GenPost | undefined): GenPost => {
      ms += 1 + Math.floor(random() * 50)
      const id = (((BigInt(ms) - 1288834974657n) << 22n) | (seq++ & 4095n)).toString()
      return {
        id,
        conversationId: fx.rootId,
        parent: parent ? parent.id : (BigInt(id) - 1000n).toString(), // a parent that never comes
        author: String(6000 + Math.floor(random() * 5)),
        ms,
        likes: 0,
        replyCount: 0,
      }
    }
    // Held before the changes, so that each read below finds a held tree behind the store.
    for (const sort of SORTS) await get(`/2/conversations/${fx.rootId}?sort=${sort}`)
    const metricsUrl = `/2/conversations/${fx.rootId}?max_results=1000&tweet.fields=public_metrics`
    const likesOf = async (postId: string) =>
      (await get(metricsUrl))
        .json<{ data: Array<{ id: string; public_metrics: { like_count: number } }> }>()
        .data.find((p) => p.id === postId)?.public_metrics.like_count
    expect(await likesOf(stored[5]!.id)).toBe(stored[5]!.likes)

    for (let round = 0; round < 4; round++) {
      const fresh: GenPost[] = []
      for (let i = 0; i < 1 + round; i++) {
        const pool = [...stored, ...fresh]
        fresh.push(reply(i === 2 ? undefined : pool[Math.floor(random() * pool.length)]))
      }
      // Round 3 also lifts an old reply to the top by its likes (a newer copy replaces it).
      const liked = round === 3 ? { ...stored[5]!, likes: 99 } : undefined
      const batch = liked ? [...fresh, liked] : fresh
      await send(batch)
      if (liked) stored[5] = liked
      stored.push(...fresh)
      await waitFor(
        `round ${round} stored`,
        async () =>
          (await storedCount(fx.rootId)) === stored.length &&
          (!liked ||
            (
              await sql<{ like_count: number }>`
                SELECT like_count FROM posts WHERE id = ${liked.id}`.execute(env.db)
            ).rows[0]!.like_count === 99),
      )
      await untilServed(stored.length)
      for (const sort of SORTS) await checkAllPages(stored, sort, round % 2 === 0 ? 1000 : 150)
      // A replaced Post is read again, not taken from the tree held before.
      expect(await likesOf(stored[5]!.id)).toBe(stored[5]!.likes)
    }
  })
})
