import http from 'node:http'
import { execFile, spawnSync } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { TwitterApi, type ITwitterApiClientPlugin } from 'twitter-api-v2'
import { Client as SdkClient } from 'twitter-api-sdk'
import { sql } from '@threadline/db'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import { startTestServer, storeLines } from '@threadline/testing/api'

/**
 * The archive reads (docs/api.md §2.7–2.9) through X's clients, unmodified: users by id and
 * username, a user's timeline and mentions paged to the end, and a Post's quotes — twitter-api-v2,
 * twitter-api-sdk and tweepy all get what the store holds.
 */
let env: TestEnv
let base: string
let token: string
const thread = generateConversation({ size: 120, seed: 21, users: 4, padding: true })
let timeline: string[]
let mentions: string[]
let quoted: string
let quotes: string[]

const ids = async (query: ReturnType<typeof sql<{ id: string }>>) =>
  (await query.execute(env.db)).rows.map((r) => r.id)

beforeAll(async () => {
  env = await createTestEnv()
  const started = await startTestServer(env, {}, { listen: true })
  base = started.url
  token = started.token
  await storeLines(env.db, thread.lines)
  timeline = await ids(sql<{ id: string }>`
    SELECT id::text AS id FROM posts WHERE author_id = 1001 ORDER BY id DESC`)
  mentions = await ids(sql<{ id: string }>`SELECT id::text AS id FROM posts
    WHERE raw->'entities'->'mentions' @> '[{"id":"1002"}]' ORDER BY id DESC`)
  const [top] = await ids(sql<{ id: string }>`SELECT referenced_id::text AS id
    FROM post_references WHERE type = 'quoted' GROUP BY 1 ORDER BY count(*) DESC, 1 LIMIT 1`)
  quoted = top!
  quotes = await ids(sql<{ id: string }>`SELECT post_id::text AS id FROM post_references
    WHERE type = 'quoted' AND referenced_id = ${quoted}::bigint ORDER BY post_id DESC`)
})
afterAll(() => env?.close())

const rewritePrefix = (to: string): ITwitterApiClientPlugin => ({
  onBeforeRequestConfig({ params }) {
    params.url = params.url.replace(/^https:\/\/api\.(x|twitter)\.com/, to)
  },
})

describe('twitter-api-v2', () => {
  const client = () =>
    new TwitterApi(token, { httpAgent: new http.Agent(), plugins: [rewritePrefix(base)] }).readOnly
      .v2

  it('users and userByUsername', async () => {
    const res = await client().users(['1001', '1003'], { 'user.fields': ['username'] })
    expect(res.data.map((u) => u.username)).toEqual(['user_1', 'user_3'])
    expect((await client().userByUsername('USER_2')).data.id).toBe('1002')
  })

  it('userTimeline, userMentionTimeline and quotes, every page', async () => {
    const all = async (paginator: AsyncIterable<{ id: string }>) => {
      const got: string[] = []
      for await (const post of paginator) got.push(post.id)
      return got
    }
    expect(timeline.length).toBeGreaterThan(15)
    expect(await all(await client().userTimeline('1001', { max_results: 5 }))).toEqual(timeline)
    expect(await all(await client().userMentionTimeline('1002', { max_results: 5 }))).toEqual(
      mentions,
    )
    expect(await all(await client().quotes(quoted, { max_results: 10 }))).toEqual(quotes)
  })
})

describe('twitter-api-sdk', () => {
  const client = () => new SdkClient(token, { base_url: base })

  it('findUsersById and findUserByUsername', async () => {
    const res = await client().users.findUsersById({ ids: ['1000', '42'] })
    expect(res.data?.map((u) => u.id)).toEqual(['1000'])
    expect(res.errors?.[0]).toMatchObject({ value: '42' })
    expect((await client().users.findUserByUsername('user_3')).data?.id).toBe('1003')
  })

  it('usersIdTweets, usersIdMentions and findTweetsThatQuoteATweet, every page', async () => {
    const all = async (pages: AsyncIterable<{ data?: Array<{ id: string }> }>) => {
      const got: string[] = []
      for await (const page of pages) got.push(...(page.data ?? []).map((p) => p.id))
      return got
    }
    expect(await all(client().tweets.usersIdTweets('1001', { max_results: 7 }))).toEqual(timeline)
    expect(await all(client().tweets.usersIdMentions('1002', { max_results: 7 }))).toEqual(mentions)
    expect(
      await all(client().tweets.findTweetsThatQuoteATweet(quoted, { max_results: 10 })),
    ).toEqual(quotes)
  })
})

const PYTHON = '/usr/bin/python3'
const DRIVER = fileURLToPath(new URL('./tweepy_archive.py', import.meta.url))
const hasTweepy = spawnSync(PYTHON, ['-c', 'import tweepy'], { stdio: 'ignore' }).status === 0
if (!hasTweepy && process.env.CI) throw new Error(`${PYTHON} cannot import tweepy (python3-tweepy)`)

describe.skipIf(!hasTweepy)('tweepy, through the README’s transport adapter', () => {
  it('get_users, get_user, get_users_tweets, get_users_mentions, get_quote_tweets', async () => {
    // Not spawnSync: the API answering tweepy runs on this process's event loop.
    const run = await promisify(execFile)(PYTHON, [DRIVER, quoted], {
      env: { ...process.env, THREADLINE_URL: base, THREADLINE_TOKEN: token },
      timeout: 60_000,
    })
    expect(run.stderr).toBe('')
    expect(JSON.parse(run.stdout)).toEqual({
      users: ['user_0', 'user_1'],
      user: '1003',
      tweets: timeline,
      mentions,
      quotes,
    })
  })
})
