import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '../../server.js'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string
const conv = generateConversation({
  size: 40,
  seed: 7,
  startMs: Date.now() - 3_600_000,
  padding: true,
})
const MISSING = '1234567890123456789'

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
  await storeLines(env.db, conv.lines)
  // A Post that quotes and replies to Posts that are not stored, by an author not stored.
  await storeLines(env.db, [
    JSON.stringify({
      data: {
        id: '1900000000000000001',
        text: 'orphan @nobody_here',
        author_id: '777',
        in_reply_to_user_id: '778',
        conversation_id: '1900000000000000000',
        created_at: '2025-03-01T00:00:00Z',
        referenced_tweets: [
          { type: 'replied_to', id: '1900000000000000000' },
          { type: 'quoted', id: conv.ids[0] },
        ],
        entities: { mentions: [{ start: 7, end: 19, username: 'nobody_here', id: '779' }] },
      },
    }),
  ])
})
afterAll(() => env?.close())

const get = (url: string, headers: Record<string, string> = {}) =>
  server.app.inject({
    method: 'GET',
    url,
    headers: { authorization: `Bearer ${token}`, ...headers },
  })

describe('GET /2/tweets', () => {
  it('returns only id and text by default, in the order of ids, with a repeated id once', async () => {
    const ids = [conv.ids[3]!, conv.ids[1]!, conv.ids[3]!]
    const res = await get(`/2/tweets?ids=${ids.join(',')}`)
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    expect(body.data.map((p: { id: string }) => p.id)).toEqual([conv.ids[3], conv.ids[1]])
    expect(Object.keys(body.data[0]).sort()).toEqual(['id', 'text'])
    expect(body.errors).toBeUndefined()
    expect(body.includes).toBeUndefined()
    for (const h of ['x-rate-limit-limit', 'x-rate-limit-remaining', 'x-rate-limit-reset']) {
      expect(res.headers[h]).toMatch(/^\d+$/)
    }
  })

  it('returns requested fields, created_at with milliseconds, and post.fields as an alias', async () => {
    const res = await get(
      `/2/tweets?ids=${conv.ids[2]}&post.fields=created_at,conversation_id,public_metrics,edit_history_tweet_ids,entities,lang,geo`,
    )
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    const post = body.data[0]
    expect(post.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/)
    expect(post.conversation_id).toBe(conv.rootId)
    expect(post.public_metrics).toMatchObject({ retweet_count: expect.any(Number) })
    expect(post.edit_history_tweet_ids).toEqual([conv.ids[2]])
    expect(post.entities.mentions).toHaveLength(1)
    expect(post.geo).toBeUndefined() // requested but never given upstream
    expect(post.author_id).toBeUndefined()
  })

  it('resolves expansions in batches, de-duplicated, with linking fields', async () => {
    const ids = conv.ids.slice(5, 25)
    const res = await get(
      `/2/tweets?ids=${ids.join(',')}&expansions=author_id,referenced_tweets.id,referenced_tweets.id.author_id,in_reply_to_user_id,entities.mentions.username&user.fields=created_at,description&tweet.fields=created_at`,
    )
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    // Mentioned users that never authored a Post were never stored: partial errors, not failures.
    for (const e of body.errors ?? []) expect(e.parameter).toBe('entities.mentions.username')
    const first = body.data[0]
    expect(first.author_id).toBeDefined()
    expect(first.referenced_tweets[0].type).toBe('replied_to')
    expect(first.in_reply_to_user_id).toBeDefined()
    const userIds = body.includes.users.map((u: { id: string }) => u.id)
    expect(new Set(userIds).size).toBe(userIds.length)
    expect(userIds[0]).toBe(first.author_id)
    const tweetIds = body.includes.tweets.map((t: { id: string }) => t.id)
    expect(new Set(tweetIds).size).toBe(tweetIds.length)
    for (const t of body.includes.tweets) {
      expect(t.created_at).toBeDefined()
      expect(t.author_id).toBeDefined()
    }
    // Every referenced Post of the page is included.
    for (const p of body.data) {
      for (const r of p.referenced_tweets ?? []) expect(tweetIds).toContain(r.id)
    }
  })

  it('expansions=author_id alone shows author_id', async () => {
    const body = (await get(`/2/tweets?ids=${conv.ids[1]}&expansions=author_id`)).json()
    expect(Object.keys(body.data[0]).sort()).toEqual(['author_id', 'id', 'text'])
    expect(body.includes.users).toHaveLength(1)
    expect(Object.keys(body.includes.users[0]).sort()).toEqual(['id', 'name', 'username'])
  })

  it('reports ids and expansion targets not stored as partial errors', async () => {
    const res = await get(
      `/2/tweets?ids=1900000000000000001,${MISSING}&expansions=author_id,in_reply_to_user_id,referenced_tweets.id,entities.mentions.username`,
    )
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('Get2TweetsResponse', body)
    expect(body.data).toHaveLength(1)
    expect(body.errors).toContainEqual({
      value: MISSING,
      detail: `Could not find tweet with ids: [${MISSING}].`,
      title: 'Not Found Error',
      resource_type: 'tweet',
      parameter: 'ids',
      resource_id: MISSING,
      type: 'https://api.twitter.com/2/problems/resource-not-found',
    })
    const params = body.errors.map(
      (e: { parameter: string; value: string }) => `${e.parameter}:${e.value}`,
    )
    expect(params).toEqual(
      expect.arrayContaining([
        'author_id:777',
        'in_reply_to_user_id:778',
        'referenced_tweets.id:1900000000000000000',
        'entities.mentions.username:nobody_here',
      ]),
    )
    expect(body.includes.tweets.map((t: { id: string }) => t.id)).toEqual([conv.ids[0]])
  })

  it('answers errors only when nothing is found', async () => {
    const body = (await get(`/2/tweets?ids=${MISSING}`)).json()
    expect(Object.keys(body)).toEqual(['errors'])
    assertXSchema('Get2TweetsResponse', body)
  })
})

describe('GET /2/tweets/:id', () => {
  it('returns an object', async () => {
    const res = await get(`/2/tweets/${conv.ids[4]}?tweet.fields=author_id`)
    const body = res.json()
    assertXSchema('Get2TweetsIdResponse', body)
    expect(body.data.id).toBe(conv.ids[4])
    expect(body.data.author_id).toBeDefined()
  })

  it('not stored: 200 with an id error', async () => {
    const res = await get(`/2/tweets/${MISSING}`)
    expect(res.statusCode).toBe(200)
    const body = res.json()
    expect(body.errors[0]).toMatchObject({
      parameter: 'id',
      detail: `Could not find tweet with id: [${MISSING}].`,
    })
    assertXSchema('Get2TweetsIdResponse', body)
  })

  it('a malformed id is a 400', async () => {
    const res = await get('/2/tweets/12x')
    expect(res.statusCode).toBe(400)
    expect(res.json().errors[0].message).toBe(
      'The `id` query parameter value [12x] does not match ^[0-9]{1,19}$',
    )
  })
})

describe('400s (docs/api.md §1.2)', () => {
  const cases: Array<[string, string, Record<string, string[]>]> = [
    [
      '/2/tweets?ids=12,foo',
      'The `ids` query parameter value [foo] does not match ^[0-9]{1,19}$',
      { ids: ['12,foo'] },
    ],
    [
      `/2/tweets?ids=${Array.from({ length: 101 }, (_, i) => i + 1).join(',')}`,
      'The number of values in the `ids` query parameter list [101] is not between 1 and 100',
      { ids: [Array.from({ length: 101 }, (_, i) => i + 1).join(',')] },
    ],
    [
      '/2/tweets?ids=1&ids=2',
      'Duplicate parameters are not allowed: the `ids` query parameter',
      { ids: ['1', '2'] },
    ],
    [
      '/2/tweets?ids=1&foo=bar',
      'The query parameter [foo] is not one of [ids,tweet.fields,expansions,media.fields,poll.fields,user.fields,place.fields,post.fields]',
      { foo: ['bar'] },
    ],
    ['/2/tweets', 'The `ids` query parameter can not be empty', { ids: [] }],
    ['/2/tweets?ids=', 'The `ids` query parameter can not be empty', { ids: [''] }],
    [
      '/2/tweets?ids=1&tweet.fields=foo',
      'The `tweet.fields` query parameter value [foo] is not one of [article,attachments,author_id,card_uri,community_id,context_annotations,conversation_id,created_at,display_text_range,edit_controls,edit_history_tweet_ids,entities,geo,id,in_reply_to_user_id,lang,media_metadata,non_public_metrics,note_tweet,organic_metrics,possibly_sensitive,promoted_metrics,public_metrics,referenced_tweets,reply_settings,scopes,source,suggested_source_links,suggested_source_links_with_counts,text,withheld]',
      { 'tweet.fields': ['foo'] },
    ],
    [
      '/2/tweets?ids=99999999999999999999',
      'The `ids` query parameter value [99999999999999999999] does not match ^[0-9]{1,19}$',
      { ids: ['99999999999999999999'] },
    ],
  ]
  for (const [url, message, parameters] of cases) {
    it(message.slice(0, 80), async () => {
      const res = await get(url)
      expect(res.statusCode).toBe(400)
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(res.json()).toEqual({
        errors: [{ parameters, message }],
        title: 'Invalid Request',
        detail: 'One or more parameters to your request was invalid.',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      })
    })
  }

  it('reports every failed check', async () => {
    const body = (await get('/2/tweets?ids=a,b&expansions=nope&zzz=1')).json()
    expect(body.errors).toHaveLength(4)
  })

  it('decodes + as a space and %2C as a comma', async () => {
    const res = await get(`/2/tweets?ids=${conv.ids[1]}%2C${conv.ids[2]}`)
    expect(res.json().data).toHaveLength(2)
    const spaced = await get(`/2/tweets?ids=1+2`)
    expect(spaced.json().errors[0].message).toBe(
      'The `ids` query parameter value [1 2] does not match ^[0-9]{1,19}$',
    )
  })
})

describe('plumbing', () => {
  it('401 without, with a malformed or an unknown token', async () => {
    for (const authorization of [undefined, 'Basic abc', 'Bearer ', 'Bearer nope']) {
      const res = await server.app.inject({
        method: 'GET',
        url: `/2/tweets?ids=1`,
        headers: authorization ? { authorization } : {},
      })
      expect(res.statusCode).toBe(401)
      expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
      expect(res.headers['x-rate-limit-limit']).toBeDefined()
      expect(res.json()).toEqual({
        title: 'Unauthorized',
        type: 'about:blank',
        status: 401,
        detail: 'Unauthorized',
      })
    }
  })

  it('404 for unknown routes', async () => {
    const res = await get('/2/nothing/here')
    expect(res.statusCode).toBe(404)
    expect(res.json()).toEqual({
      title: 'Not Found Error',
      type: 'about:blank',
      status: 404,
      detail: 'Not Found',
    })
    expect(res.headers['content-type']).toBe('application/json; charset=utf-8')
  })

  it('health and readiness', async () => {
    expect((await server.app.inject('/health')).json()).toEqual({ status: 'ok' })
    const ready = await server.app.inject('/ready')
    expect(ready.statusCode).toBe(200)
  })

  it('serves its own OpenAPI document', async () => {
    const doc = (await get('/2/openapi.json')).json()
    expect(doc.openapi).toBe('3.0.0')
    expect(Object.keys(doc.paths)).toEqual(
      expect.arrayContaining([
        '/2/tweets',
        '/2/tweets/{id}',
        '/2/tweets/search/recent',
        '/2/tweets/search/all',
        '/2/tweets/counts/recent',
        '/2/tweets/counts/all',
        '/2/tweets/search/stream/rules',
      ]),
    )
    const lookup = doc.paths['/2/tweets'].get
    expect(lookup.parameters.map((p: { name: string }) => p.name)).toContain('post.fields')
  })
})
