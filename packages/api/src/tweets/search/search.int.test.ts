import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { compareIds } from '@threadline/domain'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '../../server.js'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string
const NOW = Date.UTC(2026, 10, 20, 12, 0, 0)
// A thread of 300 Posts over the last few hours, and an older one beyond the recent window.
const thread = generateConversation({ size: 300, seed: 3, startMs: NOW - 4 * 3_600_000 })
const old = generateConversation({ size: 20, seed: 4, startMs: NOW - 20 * 86_400_000 })

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env, { now: () => new Date(NOW) }))
  await storeLines(env.db, thread.lines)
  await storeLines(env.db, old.lines)
})
afterAll(() => env?.close())

const get = (url: string) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } })

describe('search', () => {
  it('reads a whole thread back page by page, with next_token and pagination_token', async () => {
    for (const param of ['next_token', 'pagination_token']) {
      const seen: string[] = []
      let cursor: string | undefined
      let pages = 0
      do {
        const q = `query=conversation_id:${thread.rootId}&max_results=10&tweet.fields=conversation_id`
        const res = await get(
          `/2/tweets/search/recent?${q}${cursor ? `&${param}=${encodeURIComponent(cursor)}` : ''}`,
        )
        expect(res.statusCode).toBe(200)
        const body = res.json()
        assertXSchema('Get2TweetsSearchRecentResponse', body)
        const ids = body.data.map((p: { id: string }) => p.id)
        expect(body.meta.result_count).toBe(ids.length)
        expect(body.meta.newest_id).toBe(ids[0])
        expect(body.meta.oldest_id).toBe(ids[ids.length - 1])
        for (const p of body.data) expect(p.conversation_id).toBe(thread.rootId)
        seen.push(...ids)
        cursor = body.meta.next_token
        pages += 1
        expect(pages).toBeLessThanOrEqual(31)
      } while (cursor)
      expect(seen).toHaveLength(300)
      expect(new Set(seen).size).toBe(300)
      expect(seen).toEqual([...thread.ids].sort(compareIds).reverse())
      expect(pages).toBe(30)
    }
  })

  it('search/all reaches beyond seven days; recent does not', async () => {
    const q = `query=conversation_id:${old.rootId}&max_results=100`
    expect((await get(`/2/tweets/search/recent?${q}`)).json()).toEqual({
      meta: { result_count: 0 },
    })
    const all = (await get(`/2/tweets/search/all?${q}`)).json()
    assertXSchema('Get2TweetsSearchAllResponse', all)
    expect(all.meta.result_count).toBe(20)
    expect(all.meta.next_token).toBeUndefined()
  })

  it('honours since_id, until_id, start_time and end_time', async () => {
    const sorted = [...thread.ids].sort(compareIds)
    const body = (
      await get(
        `/2/tweets/search/recent?query=conversation_id:${thread.rootId}&since_id=${sorted[9]}&until_id=${sorted[20]}&max_results=100`,
      )
    ).json()
    expect(body.data.map((p: { id: string }) => p.id)).toEqual(sorted.slice(10, 20).reverse())
    const start = new Date(NOW - 4 * 3_600_000 + 150_000).toISOString()
    const timed = (
      await get(
        `/2/tweets/search/all?query=conversation_id:${thread.rootId}&start_time=${start}&max_results=500&tweet.fields=created_at`,
      )
    ).json()
    expect(timed.meta.result_count).toBeGreaterThan(10)
    expect(timed.meta.result_count).toBeLessThan(300)
    for (const p of timed.data)
      expect(Date.parse(p.created_at)).toBeGreaterThanOrEqual(Date.parse(start))
  })

  it('refuses a token altered, or made for another query', async () => {
    const q = `query=conversation_id:${thread.rootId}&max_results=10`
    const first = (await get(`/2/tweets/search/recent?${q}`)).json()
    const token = first.meta.next_token as string
    const altered = token.slice(0, -2) + (token.endsWith('A') ? 'BB' : 'AA')
    for (const url of [
      `/2/tweets/search/recent?${q}&next_token=${altered}`,
      `/2/tweets/search/recent?query=conversation_id:${old.rootId}&next_token=${token}`,
      `/2/tweets/search/all?${q}&next_token=${token}`,
      `/2/tweets/search/recent?${q}&next_token=garbage`,
    ]) {
      const res = await get(url)
      expect(res.statusCode).toBe(400)
      expect(res.json().type).toBe('https://api.twitter.com/2/problems/invalid-request')
    }
  })

  it('400s: missing query, range, enum, syntax, time window', async () => {
    const cases: Array<[string, string]> = [
      ['/2/tweets/search/recent', 'The `query` query parameter can not be empty'],
      [
        '/2/tweets/search/recent?query=x&max_results=5',
        'The `max_results` query parameter value [5] is not between 10 and 100',
      ],
      [
        '/2/tweets/search/all?query=x&max_results=501',
        'The `max_results` query parameter value [501] is not between 10 and 500',
      ],
      [
        '/2/tweets/search/recent?query=x&sort_order=oldest',
        'The `sort_order` query parameter value [oldest] is not one of [recency,relevancy]',
      ],
      [
        '/2/tweets/search/recent?query=x&start_time=2026-11-01T00:00:00Z',
        "Invalid 'start_time':'2026-11-01T00:00:00Z'. 'start_time' must be on or after 2026-11-13T12:00Z",
      ],
    ]
    for (const [url, message] of cases) {
      const res = await get(url)
      expect(res.statusCode).toBe(400)
      expect(res.json().errors[0].message).toBe(message)
    }
    const syntax = (await get('/2/tweets/search/recent?query=cats+AND+dogs')).json()
    expect(syntax.errors[0].message).toMatch(
      /^There were errors processing your request: Ambiguous use of and as a keyword.* \(at position \d+\)$/,
    )
    expect(syntax.errors[0].parameters).toEqual({ query: ['cats AND dogs'] })
  })

  it('expansions on a search page are batched and de-duplicated', async () => {
    const body = (
      await get(
        `/2/tweets/search/recent?query=conversation_id:${thread.rootId}&max_results=100&expansions=author_id,referenced_tweets.id.author_id,referenced_tweets.id`,
      )
    ).json()
    assertXSchema('Get2TweetsSearchRecentResponse', body)
    const users = body.includes.users.map((u: { id: string }) => u.id)
    expect(new Set(users).size).toBe(users.length)
  })
})

describe('counts', () => {
  it('counts a thread per hour, buckets aligned, clipped, contiguous, empty ones included', async () => {
    const start = new Date(NOW - 6 * 3_600_000 - 30 * 60_000).toISOString()
    const res = await get(
      `/2/tweets/counts/recent?query=conversation_id:${thread.rootId}&start_time=${start}`,
    )
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('Get2TweetsCountsRecentResponse', body)
    expect(body.meta.total_tweet_count).toBe(300)
    expect(body.data[0].start).toBe(start.replace('Z', '').slice(0, 19) + '.000Z')
    expect(body.data[0].end).toBe(new Date(NOW - 6 * 3_600_000).toISOString())
    expect(body.data[0].tweet_count).toBe(0)
    for (let i = 1; i < body.data.length; i++) expect(body.data[i].start).toBe(body.data[i - 1].end)
    expect(body.data.at(-1).end).toBe(new Date(NOW - 10_000).toISOString())
    expect(body.data.reduce((s: number, b: { tweet_count: number }) => s + b.tweet_count, 0)).toBe(
      300,
    )
  })

  it('minute and day granularity', async () => {
    const start = new Date(NOW - 2 * 3_600_000).toISOString()
    const minutes = (
      await get(
        `/2/tweets/counts/recent?query=conversation_id:${thread.rootId}&start_time=${start}&granularity=minute`,
      )
    ).json()
    expect(minutes.data.length).toBe(120)
    const days = (
      await get(`/2/tweets/counts/all?query=conversation_id:${old.rootId}&granularity=day`)
    ).json()
    assertXSchema('Get2TweetsCountsAllResponse', days)
    expect(days.meta.total_tweet_count).toBe(20)
    expect(days.data.length).toBe(31)
  })

  it('counts/all pages by 31 days', async () => {
    const start = new Date(NOW - 80 * 86_400_000).toISOString()
    const q = `/2/tweets/counts/all?query=conversation_id:${old.rootId}&granularity=day&start_time=${start}`
    let total = 0
    let pages = 0
    let next: string | undefined
    do {
      const body = (await get(`${q}${next ? `&next_token=${next}` : ''}`)).json()
      total += body.meta.total_tweet_count
      next = body.meta.next_token
      pages += 1
    } while (next && pages < 10)
    expect(pages).toBe(3)
    expect(total).toBe(20)
  })

  it('400s', async () => {
    const res = await get('/2/tweets/counts/recent?query=x&granularity=week')
    expect(res.json().errors[0].message).toBe(
      'The `granularity` query parameter value [week] is not one of [minute,hour,day]',
    )
  })
})
