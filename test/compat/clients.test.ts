import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TwitterApi, type ITwitterApiClientPlugin } from 'twitter-api-v2'
import { Client as SdkClient } from 'twitter-api-sdk'
import { Client as XdkClient } from '@xdevplatform/xdk'
import { compareIds } from '@threadline/domain'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import { startTestServer, storeLines } from '@threadline/testing/api'

/**
 * The npm X clients, unmodified, against a running Threadline: each does lookup, search with
 * pagination, counts and rules, and all get the same answers.
 */
let env: TestEnv
let base: string
let token: string
const thread = generateConversation({ size: 45, seed: 11, startMs: Date.now() - 2 * 3_600_000 })
const newestFirst = [...thread.ids].sort(compareIds).reverse()
const query = `conversation_id:${thread.rootId}`

beforeAll(async () => {
  env = await createTestEnv()
  const started = await startTestServer(env, {}, { listen: true })
  base = started.url
  token = started.token
  await storeLines(env.db, thread.lines)
})
afterAll(() => env?.close())

/** twitter-api-v2 only knows api.x.com: rewrite the prefix before each request. */
const rewritePrefix = (to: string): ITwitterApiClientPlugin => ({
  onBeforeRequestConfig({ params }) {
    params.url = params.url.replace(/^https:\/\/api\.(x|twitter)\.com/, to)
  },
})

describe('twitter-api-v2', () => {
  const client = () =>
    new TwitterApi(token, { httpAgent: new http.Agent(), plugins: [rewritePrefix(base)] }).readOnly
      .v2

  it('looks up Posts', async () => {
    const res = await client().tweets(thread.ids.slice(0, 3), {
      'tweet.fields': ['created_at', 'conversation_id'],
      expansions: ['author_id'],
    })
    expect(res.data.map((p) => p.id)).toEqual(thread.ids.slice(0, 3))
    expect(res.data[0]!.conversation_id).toBe(thread.rootId)
    expect(res.includes?.users?.length).toBeGreaterThan(0)
    const one = await client().singleTweet(thread.ids[1]!)
    expect(one.data.id).toBe(thread.ids[1])
  })

  it('searches with pagination', async () => {
    const paginator = await client().search(query, { max_results: 10 })
    const ids: string[] = []
    for await (const post of paginator) ids.push(post.id)
    expect(ids).toEqual(newestFirst)
  })

  it('counts', async () => {
    const res = await client().tweetCountRecent(query, { granularity: 'hour' })
    expect(res.meta.total_tweet_count).toBe(45)
  })

  it('manages rules', async () => {
    const rw = new TwitterApi(token, {
      httpAgent: new http.Agent(),
      plugins: [rewritePrefix(base)],
    }).v2
    const added = await rw.updateStreamRules({ add: [{ value: 'from:v2client', tag: 'v2' }] })
    expect(added.meta.summary.created).toBe(1)
    const listed = await rw.streamRules()
    expect(listed.data.map((r) => r.value)).toContain('from:v2client')
    const deleted = await rw.updateStreamRules({ delete: { ids: [added.data[0]!.id] } })
    expect(deleted.meta.summary.deleted).toBe(1)
  })
})

describe('twitter-api-sdk', () => {
  const client = () => new SdkClient(token, { base_url: base })

  it('looks up Posts', async () => {
    const res = await client().tweets.findTweetsById({
      ids: thread.ids.slice(0, 3),
      'tweet.fields': ['created_at', 'conversation_id'],
      expansions: ['author_id'],
    })
    expect(res.data?.map((p) => p.id)).toEqual(thread.ids.slice(0, 3))
    const one = await client().tweets.findTweetById(thread.ids[1]!)
    expect(one.data?.id).toBe(thread.ids[1])
  })

  it('searches with pagination', async () => {
    const ids: string[] = []
    for await (const page of client().tweets.tweetsRecentSearch({ query, max_results: 10 })) {
      ids.push(...(page.data ?? []).map((p) => p.id))
    }
    expect(ids).toEqual(newestFirst)
  })

  it('counts', async () => {
    const res = await client().tweets.tweetCountsRecentSearch({ query, granularity: 'hour' })
    expect(res.meta?.total_tweet_count).toBe(45)
  })

  it('manages rules', async () => {
    const added = await client().tweets.addOrDeleteRules({ add: [{ value: 'from:sdkclient' }] })
    expect((added.meta.summary as { created?: number }).created).toBe(1)
    const listed = await client().tweets.getRules()
    expect(listed.data?.map((r) => r.value)).toContain('from:sdkclient')
    const deleted = await client().tweets.addOrDeleteRules({
      delete: { ids: [added.data![0]!.id!] },
    })
    expect((deleted.meta.summary as { deleted?: number }).deleted).toBe(1)
  })
})

describe('@xdevplatform/xdk', () => {
  const client = () => new XdkClient({ baseUrl: base, bearerToken: token })

  it('looks up Posts (sending post.fields)', async () => {
    const res = await client().posts.getByIds(thread.ids.slice(0, 3), {
      postFields: ['created_at', 'conversation_id'],
      expansions: ['author_id'],
    })
    expect(res.data?.map((p: { id?: string }) => p.id)).toEqual(thread.ids.slice(0, 3))
    // xdk hands fields back camel-cased.
    const first = res.data?.[0] as { conversation_id?: string; conversationId?: string }
    expect(first.conversation_id ?? first.conversationId).toBe(thread.rootId)
    const one = await client().posts.getById(thread.ids[1]!)
    expect(one.data?.id).toBe(thread.ids[1])
  })

  it('searches with pagination', async () => {
    const ids: string[] = []
    let nextToken: string | undefined
    for (let page = 0; page < 10; page++) {
      const res = await client().posts.searchRecent(query, { maxResults: 10, nextToken })
      ids.push(...(res.data ?? []).map((p: { id?: string }) => p.id!))
      nextToken =
        res.meta?.nextToken ?? (res.meta as { next_token?: string } | undefined)?.next_token
      if (!nextToken) break
    }
    expect(ids).toEqual(newestFirst)
  })

  it('counts', async () => {
    const res = await client().posts.getCountsRecent(query, { granularity: 'hour' })
    const meta = res.meta as { total_tweet_count?: number; totalTweetCount?: number }
    expect(meta.total_tweet_count ?? meta.totalTweetCount).toBe(45)
  })

  it('manages rules', async () => {
    const added = await client().stream.updateRules({ add: [{ value: 'from:xdkclient' }] })
    const created = (added.data ?? []) as Array<{ id: string; value: string }>
    expect(created).toHaveLength(1)
    const listed = await client().stream.getRules()
    expect((listed.data ?? []).map((r: { value?: string }) => r.value)).toContain('from:xdkclient')
    const deleted = await client().stream.updateRules({ delete: { ids: [created[0]!.id] } })
    expect(deleted.meta).toBeDefined()
  })
})
