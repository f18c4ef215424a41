import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from '@threadline/db'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '../server.js'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string
// Few users, so that each has many Posts and mentions: pages run deep.
const conv = generateConversation({ size: 240, seed: 5, users: 4, padding: true })

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
  await storeLines(env.db, conv.lines)
})
afterAll(() => env?.close())

const get = (url: string) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } })

type Page = { data?: Array<{ id: string }>; meta: Record<string, unknown>; errors?: unknown[] }

/** Every page of a list, following next_token to the end. */
async function allPages(url: string, schema: string): Promise<{ ids: string[]; pages: Page[] }> {
  const ids: string[] = []
  const pages: Page[] = []
  let next: string | undefined
  do {
    const sep = url.includes('?') ? '&' : '?'
    const res = await get(next ? `${url}${sep}pagination_token=${next}` : url)
    expect(res.statusCode, res.body).toBe(200)
    const body = res.json() as Page
    assertXSchema(schema, body)
    pages.push(body)
    ids.push(...(body.data ?? []).map((p) => p.id))
    next = body.meta.next_token as string | undefined
  } while (next)
  return { ids, pages }
}

const column = async (query: ReturnType<typeof sql<{ id: string }>>) =>
  (await query.execute(env.db)).rows.map((r) => r.id)

describe('GET /2/users/:id/tweets', () => {
  it('pages through every stored Post of the user, newest first, with X’s meta', async () => {
    const expected = await column(
      sql<{ id: string }>`SELECT id::text AS id FROM posts WHERE author_id = 1001 ORDER BY id DESC`,
    )
    expect(expected.length).toBeGreaterThan(40)
    const { ids, pages } = await allPages(
      '/2/users/1001/tweets?max_results=7&tweet.fields=author_id',
      'Get2UsersIdTweetsResponse',
    )
    expect(ids).toEqual(expected)
    const first = pages[0]!
    expect(first.meta).toMatchObject({
      result_count: 7,
      newest_id: expected[0],
      oldest_id: expected[6],
    })
    expect(pages.at(-1)!.meta.next_token).toBeUndefined()
  })

  it('previous_token goes back toward newer Posts, page for page, and the first page has none', async () => {
    const url = '/2/users/1001/tweets?max_results=7'
    const { pages } = await allPages(url, 'Get2UsersIdTweetsResponse')
    expect(pages.length).toBeGreaterThan(3)
    expect(pages[0]!.meta.previous_token).toBeUndefined()
    for (const page of pages.slice(1)) expect(page.meta.previous_token).toBeDefined()
    // From the last page back to the first, by previous_token alone.
    let page = pages.at(-1)!
    for (let i = pages.length - 2; i >= 0; i--) {
      const res = await get(`${url}&pagination_token=${page.meta.previous_token as string}`)
      expect(res.statusCode, res.body).toBe(200)
      page = res.json() as Page
      assertXSchema('Get2UsersIdTweetsResponse', page)
      expect(page.data!.map((p) => p.id)).toEqual(pages[i]!.data!.map((p) => p.id))
      expect(page.meta.next_token).toBeDefined()
    }
    expect(page.meta.previous_token).toBeUndefined()
    // And forward again from there by next_token.
    const again = await get(`${url}&pagination_token=${page.meta.next_token as string}`)
    expect((again.json() as Page).data!.map((p) => p.id)).toEqual(pages[1]!.data!.map((p) => p.id))
  })

  it('exclude=replies, since_id and until_id bound the list', async () => {
    const { ids } = await allPages(
      '/2/users/1000/tweets?exclude=replies&max_results=100',
      'Get2UsersIdTweetsResponse',
    )
    const expected = await column(
      sql<{ id: string }>`SELECT id::text AS id FROM posts
        WHERE author_id = 1000 AND in_reply_to_post_id IS NULL ORDER BY id DESC`,
    )
    expect(ids).toEqual(expected)
    const all = await column(
      sql<{ id: string }>`SELECT id::text AS id FROM posts WHERE author_id = 1002 ORDER BY id DESC`,
    )
    const since = all[30]!
    const until = all[5]!
    const bounded = await allPages(
      `/2/users/1002/tweets?since_id=${since}&until_id=${until}&max_results=5`,
      'Get2UsersIdTweetsResponse',
    )
    expect(bounded.ids).toEqual(all.slice(6, 30))
  })

  it('expansions come with the page (renderPosts)', async () => {
    const body = (
      await get('/2/users/1003/tweets?max_results=5&expansions=author_id&user.fields=username')
    ).json()
    assertXSchema('Get2UsersIdTweetsResponse', body)
    expect(body.includes.users).toEqual([{ id: '1003', name: 'User 3', username: 'user_3' }])
  })

  it('a user with nothing stored has an empty page; a token of another list is X’s 400', async () => {
    const empty = (await get('/2/users/42/tweets')).json()
    assertXSchema('Get2UsersIdTweetsResponse', empty)
    expect(empty).toEqual({ meta: { result_count: 0 } })

    const first = (await get('/2/users/1001/tweets?max_results=5')).json()
    const token1 = first.meta.next_token as string
    for (const url of [
      `/2/users/1002/tweets?pagination_token=${token1}`,
      `/2/users/1001/mentions?pagination_token=${token1}`,
      `/2/users/1001/tweets?exclude=replies&pagination_token=${token1}`,
      `/2/tweets/1001/quote_tweets?pagination_token=${token1}`,
      '/2/users/1001/tweets?pagination_token=forged',
    ]) {
      const res = await get(url)
      expect(res.statusCode, url).toBe(400)
      expect(res.json().errors[0].parameters).toHaveProperty('pagination_token')
    }
    expect((await get('/2/users/1001/tweets?max_results=4')).statusCode).toBe(400)
  })
})

describe('GET /2/users/:id/mentions', () => {
  it('pages through every stored Post that mentions the user, newest first', async () => {
    const expected = await column(
      sql<{ id: string }>`SELECT id::text AS id FROM posts
        WHERE raw->'entities'->'mentions' @> '[{"id":"1002"}]' ORDER BY id DESC`,
    )
    expect(expected.length).toBeGreaterThan(40)
    const { ids } = await allPages(
      '/2/users/1002/mentions?max_results=9&tweet.fields=entities',
      'Get2UsersIdMentionsResponse',
    )
    expect(ids).toEqual(expected)
  })

  it('a mention arriving with a later, fuller copy of a Post is found (the update trigger)', async () => {
    const id = '1990000000000000001'
    const post = { id, text: 'hello @late_one', author_id: '1000' }
    // First only as an included copy, without entities; then the Post itself, with them.
    await storeLines(env.db, [
      JSON.stringify({
        data: { id: '1990000000000000002', text: 'q' },
        includes: { tweets: [post] },
      }),
    ])
    expect((await get('/2/users/8800/mentions')).json().meta.result_count).toBe(0)
    await storeLines(env.db, [
      JSON.stringify({
        data: {
          ...post,
          entities: { mentions: [{ start: 6, end: 15, username: 'late_one', id: '8800' }] },
        },
      }),
    ])
    const body = (await get('/2/users/8800/mentions')).json()
    expect(body.data).toEqual([{ id, text: post.text }])
  })
})

describe('GET /2/tweets/:id/quote_tweets', () => {
  it('lists the Posts that quote a Post, newest first, as quotes_of_tweet_id: finds them', async () => {
    const { rows } = await sql<{ id: string; n: string }>`
      SELECT referenced_id::text AS id, count(*) AS n FROM post_references
      WHERE type = 'quoted' GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 1`.execute(env.db)
    const quoted = rows[0]!.id
    const { ids, pages } = await allPages(
      `/2/tweets/${quoted}/quote_tweets?max_results=10`,
      'Get2TweetsIdQuoteTweetsResponse',
    )
    const search = (
      await get(`/2/tweets/search/all?query=quotes_of_tweet_id:${quoted}&max_results=100`)
    ).json()
    expect(ids).toEqual(search.data.map((p: { id: string }) => p.id))
    expect(Object.keys(pages[0]!.meta).sort()).toEqual(
      ids.length > 10 ? ['next_token', 'result_count'] : ['result_count'],
    )
  })

  it('an unquoted Post has an empty page; max_results below 10 is X’s 400', async () => {
    expect((await get(`/2/tweets/42/quote_tweets`)).json()).toEqual({
      meta: { result_count: 0 },
    })
    expect((await get(`/2/tweets/${conv.ids[0]}/quote_tweets?max_results=5`)).statusCode).toBe(400)
  })
})
