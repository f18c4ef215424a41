import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import type { ApiServer } from '../server.js'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'

let env: TestEnv
let server: ApiServer
let token: string
const conv = generateConversation({ size: 30, seed: 11, users: 10, padding: true })
const PINNED_MISSING = '1234567890123456789'

const profile = (id: string, username: string, name: string, extra: object = {}) =>
  JSON.stringify({
    data: { id: String(BigInt(id) * 1000n + 1n), text: 'x', author_id: id },
    includes: { users: [{ id, name, username, ...extra }] },
  })

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env))
  await storeLines(env.db, conv.lines)
  await storeLines(
    env.db,
    [
      profile('7001', 'Pinner', 'Pins', {
        pinned_tweet_id: conv.ids[4],
        description: 'pins a Post',
        public_metrics: { followers_count: 5, following_count: 1, tweet_count: 9, listed_count: 0 },
      }),
      profile('7002', 'LostPin', 'Lost', { pinned_tweet_id: PINNED_MISSING }),
    ],
    '2026-11-20T10:00:00.000Z',
  )
})
afterAll(() => env?.close())

const get = (url: string) =>
  server.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } })

describe('GET /2/users and /2/users/:id', () => {
  it('returns stored users in the order asked, and X’s error item for the others', async () => {
    const res = await get(`/2/users?ids=1003,${PINNED_MISSING},1001,1003`)
    expect(res.statusCode).toBe(200)
    const body = res.json()
    assertXSchema('Get2UsersResponse', body)
    expect(body.data).toEqual([
      { id: '1003', name: 'User 3', username: 'user_3' },
      { id: '1001', name: 'User 1', username: 'user_1' },
    ])
    expect(body.errors).toEqual([
      expect.objectContaining({
        resource_type: 'user',
        parameter: 'ids',
        value: PINNED_MISSING,
        detail: `Could not find user with ids: [${PINNED_MISSING}].`,
      }),
    ])
  })

  it('gives user.fields the upstream sent, and the pinned Post with tweet.fields', async () => {
    const res = await get(
      '/2/users/7001?user.fields=description,public_metrics,location&expansions=pinned_tweet_id&tweet.fields=created_at,author_id',
    )
    const body = res.json()
    assertXSchema('Get2UsersIdResponse', body)
    expect(body.data).toMatchObject({
      id: '7001',
      username: 'Pinner',
      description: 'pins a Post',
      pinned_tweet_id: conv.ids[4],
      public_metrics: { followers_count: 5 },
    })
    expect(body.data.location).toBeUndefined()
    expect(body.includes.tweets).toHaveLength(1)
    expect(body.includes.tweets[0]).toMatchObject({
      id: conv.ids[4],
      author_id: expect.any(String),
    })
    expect(body.includes.tweets[0].created_at).toMatch(/\.\d{3}Z$/)
  })

  it('names a pinned Post that is not stored in errors', async () => {
    const body = (await get('/2/users/7002?expansions=pinned_tweet_id')).json()
    assertXSchema('Get2UsersIdResponse', body)
    expect(body.data.id).toBe('7002')
    expect(body.includes).toBeUndefined()
    expect(body.errors).toEqual([
      expect.objectContaining({ parameter: 'pinned_tweet_id', value: PINNED_MISSING }),
    ])
  })

  it('an unknown id is 200 with the error item; a malformed one is X’s 400', async () => {
    const body = (await get(`/2/users/${PINNED_MISSING}`)).json()
    assertXSchema('Get2UsersIdResponse', body)
    expect(body.errors[0].detail).toBe(`Could not find user with id: [${PINNED_MISSING}].`)
    const bad = await get('/2/users/abc')
    expect(bad.statusCode).toBe(400)
    expect(bad.json().errors[0].parameters).toEqual({ id: ['abc'] })
    expect((await get('/2/users?ids=1&expansions=author_id')).statusCode).toBe(400)
  })
})

describe('GET /2/users/by and /2/users/by/username/:username', () => {
  it('matches usernames case-insensitively, once each, with errors for the unknown', async () => {
    const res = await get('/2/users/by?usernames=USER_2,nobody_here,user_2,pinner')
    const body = res.json()
    assertXSchema('Get2UsersByResponse', body)
    expect(body.data.map((u: { id: string }) => u.id)).toEqual(['1002', '7001'])
    expect(body.errors).toEqual([
      expect.objectContaining({
        parameter: 'usernames',
        value: 'nobody_here',
        detail: 'Could not find user with usernames: [nobody_here].',
      }),
    ])
  })

  it('one user by username', async () => {
    const body = (await get('/2/users/by/username/User_5?user.fields=created_at')).json()
    assertXSchema('Get2UsersByUsernameUsernameResponse', body)
    expect(body.data).toEqual({ id: '1005', name: 'User 5', username: 'user_5' })
    const none = (await get('/2/users/by/username/ghost')).json()
    assertXSchema('Get2UsersByUsernameUsernameResponse', none)
    expect(none.errors[0]).toMatchObject({ parameter: 'username', value: 'ghost' })
  })

  it('refuses a malformed username or too many with X’s 400', async () => {
    for (const url of [
      '/2/users/by?usernames=bad-name',
      `/2/users/by?usernames=${Array.from({ length: 101 }, (_, i) => `u${i}`).join(',')}`,
      '/2/users/by/username/much_too_long_username',
    ]) {
      const res = await get(url)
      expect(res.statusCode, url).toBe(400)
      expect(res.json().errors[0].message).toMatch(/usernames?`/)
    }
  })
})

describe('profiles: the newest seen wins', () => {
  it('an older copy (backfill) stored later never replaces a newer one', async () => {
    await storeLines(env.db, [profile('7100', 'fresh_name', 'Fresh')], '2026-11-25T10:00:00.000Z')
    await storeLines(env.db, [profile('7100', 'stale_name', 'Stale')], '2026-11-24T10:00:00.000Z')
    const body = (await get('/2/users/7100')).json()
    expect(body.data).toEqual({ id: '7100', name: 'Fresh', username: 'fresh_name' })
    expect((await get('/2/users/by/username/stale_name')).json().errors).toHaveLength(1)
  })

  it('a newer copy replaces the profile', async () => {
    await storeLines(env.db, [profile('7100', 'newer_name', 'Newer')], '2026-11-26T10:00:00.000Z')
    const body = (await get('/2/users/by/username/NEWER_NAME')).json()
    expect(body.data).toEqual({ id: '7100', name: 'Newer', username: 'newer_name' })
  })

  it('a username that passed to another user resolves to whoever was seen with it last', async () => {
    await storeLines(env.db, [profile('7201', 'handed_on', 'First')], '2026-11-20T10:00:00.000Z')
    await storeLines(env.db, [profile('7202', 'Handed_On', 'Second')], '2026-11-21T10:00:00.000Z')
    const body = (await get('/2/users/by/username/handed_on')).json()
    expect(body.data.id).toBe('7202')
  })
})

describe('GET /2/openapi.json', () => {
  it('documents every archive read with its parameters', async () => {
    const doc = (await server.app.inject({ method: 'GET', url: '/2/openapi.json' })).json()
    for (const path of [
      '/2/users',
      '/2/users/{id}',
      '/2/users/by',
      '/2/users/by/username/{username}',
      '/2/users/{id}/tweets',
      '/2/users/{id}/mentions',
      '/2/tweets/{id}/quote_tweets',
      '/2/conversations/{conversation_id}/metrics',
      '/2/conversations/metrics',
    ]) {
      expect(doc.paths[path]?.get, path).toBeDefined()
    }
    const names = (path: string) =>
      (doc.paths[path].get.parameters as Array<{ name: string }>).map((p) => p.name)
    expect(names('/2/users/{id}/tweets')).toEqual(
      expect.arrayContaining(['id', 'max_results', 'pagination_token', 'exclude', 'since_id']),
    )
    expect(names('/2/conversations/{conversation_id}/metrics')).toContain('granularity')
  })
})
