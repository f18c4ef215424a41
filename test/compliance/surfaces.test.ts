import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ApiServer } from '@threadline/api'
import { applyComplianceEvents, sql, type ComplianceApplied } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import { eraseStoredPosts, publishStored } from '@threadline/redis'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { assertXSchema } from '@threadline/testing/api'
import type { Writer } from '@threadline/writer'
import { startApi } from '../support/api.js'
import {
  appWithRules,
  openRawStream,
  postLine,
  replyIn,
  startWriter,
  store,
  type UserSpec,
} from '../stream/harness.js'

/**
 * What X withdraws, on every surface (docs/api.md §7), against the API as production builds it,
 * Posts stored by the real writer and events applied by applyComplianceEvents: a mid-tree Post
 * deleted (erased from every table and every Redis key), a protected author's Posts and a dropped
 * Post hidden, then shown again by the un-event.
 */

let env: TestEnv
let api: ApiServer
let writer: Writer
let token: string

const alice: UserSpec = { id: '4501', username: 'alice_c', name: 'Alice' }
const bob: UserSpec = { id: '4502', username: 'bob_c', name: 'Bob' }
const carol: UserSpec = { id: '4503', username: 'carol_c', name: 'Carol' }
const dave: UserSpec = { id: '4504', username: 'dave_c', name: 'Dave' }

/** The deleted Post's text: a word found nowhere else, so that any copy of it can be found. */
const SECRET = 'zqxvesperwithdrawn'

const START = Date.now()
/** An id made `minutesAgo` before the test started: counts see only Posts 10 s old or older. */
const idAgo = (minutesAgo: number) =>
  ((BigInt(START - minutesAgo * 60_000) - 1288834974657n) << 22n).toString()

const reply = (
  id: string,
  text: string,
  author: UserSpec,
  parent: { id: string; author: UserSpec },
) => replyIn(root.id, { id, text, author, replyTo: parent })

const root = postLine({ id: idAgo(20), text: 'the root of a thread on compliance', author: alice })
const rootRef = { id: root.id, author: alice }
// The mid-tree Post: it mentions alice and has a reply below it.
const mid = replyIn(root.id, {
  id: idAgo(19),
  text: `@alice_c ${SECRET} a reply that will be deleted`,
  author: bob,
  replyTo: rootRef,
  extra: {
    entities: { mentions: [{ start: 0, end: 8, username: 'alice_c', id: alice.id }] },
  },
})
const underMid = reply(idAgo(18), 'a reply below the deleted one', alice, mid)
const byCarol = reply(idAgo(17), 'carol speaks before she protects her account', carol, rootRef)
const underCarol = reply(idAgo(16), 'a reply to carol', alice, byCarol)
const byDave = reply(idAgo(15), 'dave says something X drops', dave, rootRef)

const at = (minute: number) => new Date(Date.now() - (60 - minute) * 60_000).toISOString()
const event = (
  e: Pick<ComplianceEvent, 'kind' | 'id' | 'action'> & Partial<ComplianceEvent>,
): ComplianceEvent => ({
  eventAt: at(0),
  receivedAt: new Date().toISOString(),
  source: 'stream',
  ...e,
})

async function get(path: string): Promise<{ status: number; body: any; text: string }> {
  const res = await fetch(`${api.url()}${path}`, { headers: { authorization: `Bearer ${token}` } })
  const text = await res.text()
  let body: unknown
  try {
    body = JSON.parse(text)
  } catch {
    body = undefined
  }
  return { status: res.status, body, text }
}

/** Every base table of this file's schema, with the rows whose text holds `needle`. */
async function tablesHolding(needle: string): Promise<string[]> {
  const { rows: tables } = await sql<{ name: string }>`
    SELECT table_name AS name FROM information_schema.tables
    WHERE table_schema = ${env.schema} AND table_type = 'BASE TABLE'`.execute(env.db)
  expect(tables.length).toBeGreaterThan(20)
  const found: string[] = []
  for (const { name } of tables) {
    // Each row as text: every column of it, JSON and arrays included.
    const { rows } = await sql<{ n: string }>`
      SELECT count(*) AS n FROM ${sql.table(name)} t WHERE t::text LIKE ${`%${needle}%`}`.execute(
      env.db,
    )
    if (Number(rows[0]!.n) > 0) found.push(name)
  }
  return found
}

/** Every Redis key of this file's prefix whose value holds `needle`. */
async function redisKeysHolding(needle: string): Promise<string[]> {
  const found: string[] = []
  let cursor = '0'
  do {
    const [next, keys] = await env.redis.scan(cursor, 'MATCH', `${env.prefix}*`, 'COUNT', 500)
    cursor = next
    for (const key of keys) {
      const type = await env.redis.type(key)
      let text = ''
      if (type === 'string') text = (await env.redis.get(key)) ?? ''
      else if (type === 'stream') text = JSON.stringify(await env.redis.xrange(key, '-', '+'))
      else if (type === 'hash') text = JSON.stringify(await env.redis.hgetall(key))
      else if (type === 'list') text = JSON.stringify(await env.redis.lrange(key, 0, -1))
      else if (type === 'set') text = JSON.stringify(await env.redis.smembers(key))
      else if (type === 'zset') text = JSON.stringify(await env.redis.zrange(key, 0, -1))
      if (text.includes(needle)) found.push(key)
    }
  } while (cursor !== '0')
  return found
}

const ids = (body: { data?: Array<{ id: string }> }) => (body.data ?? []).map((p) => p.id)

let applied: ComplianceApplied

beforeAll(async () => {
  env = await createTestEnv()
  api = await startApi(env, { stream: { connectionScope: 'cluster' } })
  writer = await startWriter(env)
  ;({ token } = await appWithRules(env, 'compliance', [{ value: `conversation_id:${root.id}` }]))
  // Three batches, three packs in the stored stream: erasing the deleted Post's pack leaves the
  // others to replay.
  await store(env, writer, [root.line, byCarol.line, byDave.line])
  // A cut copy of it beside it, kept as a reject.
  await store(env, writer, [mid.line, mid.line.slice(0, -40)])
  await store(env, writer, [underMid.line, underCarol.line])
})

afterAll(() => env?.close())

describe('withdrawn Posts on every surface', () => {
  it('before: the deleted Post is in the database and the stored stream, and found', async () => {
    expect(await tablesHolding(SECRET)).toEqual(expect.arrayContaining(['posts', 'ingest_rejects']))
    expect(await redisKeysHolding(SECRET)).toEqual([`${env.prefix}:stored`])
    expect(ids((await get(`/2/tweets/search/recent?query=${SECRET}`)).body)).toEqual([mid.id])
  })

  it('a delete erases the mid-tree Post from every table and Redis key', async () => {
    applied = await applyComplianceEvents(env.db, [
      event({ kind: 'tweet', id: mid.id, action: 'delete', authorId: bob.id, eventAt: at(1) }),
      event({ kind: 'user', id: carol.id, action: 'user_protect', eventAt: at(2) }),
      event({ kind: 'tweet', id: byDave.id, action: 'drop', authorId: dave.id, eventAt: at(3) }),
    ])
    expect(applied).toMatchObject({ applied: 3, repeated: 0, conversations: [root.id] })
    expect(applied.erased.map((e) => e.id)).toEqual([mid.id])
    // What the writer's compliance job does after commit.
    expect(await eraseStoredPosts(env.redis, env.prefix, applied.erased, 600_000)).toBeGreaterThan(
      0,
    )
    expect(await tablesHolding(SECRET)).toEqual([])
    expect(await redisKeysHolding(SECRET)).toEqual([])
    // The row stays as a placeholder of the tree.
    const { rows } = await sql<{ parent: string; conv: string }>`
      SELECT in_reply_to_post_id::text AS parent, conversation_id::text AS conv
      FROM posts WHERE id = ${mid.id}`.execute(env.db)
    expect(rows).toEqual([{ parent: root.id, conv: root.id }])
  })

  it("lookup names them in X's errors: not found, not authorized for a protected author", async () => {
    const wanted = [root.id, mid.id, byCarol.id, byDave.id]
    const { status, body } = await get(`/2/tweets?ids=${wanted.join(',')}`)
    expect(status).toBe(200)
    assertXSchema('Get2TweetsResponse', body)
    expect(ids(body)).toEqual([root.id])
    expect(body.errors).toEqual([
      {
        value: mid.id,
        detail: `Could not find tweet with ids: [${mid.id}].`,
        title: 'Not Found Error',
        resource_type: 'tweet',
        parameter: 'ids',
        resource_id: mid.id,
        type: 'https://api.twitter.com/2/problems/resource-not-found',
      },
      expect.objectContaining({ value: byDave.id, title: 'Not Found Error' }),
      {
        value: byCarol.id,
        detail: `Sorry, you are not authorized to see the Tweet with ids: [${byCarol.id}].`,
        title: 'Authorization Error',
        resource_type: 'tweet',
        parameter: 'ids',
        resource_id: byCarol.id,
        section: 'data',
        type: 'https://api.twitter.com/2/problems/not-authorized-for-resource',
      },
    ])
    assertXSchema('ResourceNotFoundProblem', body.errors[0])
    assertXSchema('ResourceUnauthorizedProblem', body.errors[2])

    const one = await get(`/2/tweets/${mid.id}?tweet.fields=author_id,created_at`)
    assertXSchema('Get2TweetsIdResponse', one.body)
    expect(one.body).toEqual({
      errors: [expect.objectContaining({ parameter: 'id', resource_id: mid.id })],
    })
    const protectedOne = await get(`/2/tweets/${byCarol.id}`)
    assertXSchema('Get2TweetsIdResponse', protectedOne.body)
    expect(protectedOne.body.errors[0].type).toBe(
      'https://api.twitter.com/2/problems/not-authorized-for-resource',
    )
  })

  it('includes leave them out and name them in errors', async () => {
    const { body } = await get(
      `/2/tweets?ids=${underMid.id},${underCarol.id}&expansions=referenced_tweets.id,author_id`,
    )
    assertXSchema('Get2TweetsResponse', body)
    expect(ids(body)).toEqual([underMid.id, underCarol.id])
    expect(body.includes.tweets ?? []).toEqual([])
    expect(body.includes.users.map((u: { id: string }) => u.id)).toEqual([alice.id])
    expect(body.errors).toEqual([
      expect.objectContaining({
        parameter: 'referenced_tweets.id',
        resource_id: mid.id,
        type: 'https://api.twitter.com/2/problems/resource-not-found',
      }),
      expect.objectContaining({
        parameter: 'referenced_tweets.id',
        resource_id: byCarol.id,
        section: 'includes',
        type: 'https://api.twitter.com/2/problems/not-authorized-for-resource',
      }),
    ])
  })

  it('search, counts, timelines and mentions leave them out', async () => {
    const search = await get(`/2/tweets/search/recent?query=conversation_id:${root.id}`)
    expect(new Set(ids(search.body))).toEqual(new Set([root.id, underMid.id, underCarol.id]))
    expect((await get(`/2/tweets/search/recent?query=${SECRET}`)).body).toEqual({
      meta: { result_count: 0 },
    })
    const counts = await get(
      `/2/tweets/counts/recent?query=conversation_id:${root.id}&granularity=day`,
    )
    expect(counts.body.meta.total_tweet_count).toBe(3)
    expect((await get(`/2/users/${dave.id}/tweets`)).body.meta.result_count).toBe(0)
    expect((await get(`/2/users/${bob.id}/tweets`)).body.meta.result_count).toBe(0)
    expect(ids((await get(`/2/users/${alice.id}/mentions`)).body)).not.toContain(mid.id)
  })

  it('users X withdrew are never shown', async () => {
    const { body } = await get(`/2/users?ids=${alice.id},${carol.id}`)
    assertXSchema('Get2UsersResponse', body)
    expect(ids(body)).toEqual([alice.id])
    expect(body.errors).toEqual([expect.objectContaining({ resource_id: carol.id })])
    const byName = await get(`/2/users/by/username/${carol.username}`)
    expect(byName.body.data).toBeUndefined()
    expect(byName.body.errors).toHaveLength(1)
    // A suspended user is named as X names one.
    const erin: UserSpec = { id: '4505', username: 'erin_c', name: 'Erin' }
    await store(env, writer, [postLine({ text: 'erin, before her suspension', author: erin }).line])
    await applyComplianceEvents(env.db, [
      event({ kind: 'user', id: erin.id, action: 'user_suspend' }),
    ])
    /** X's error for a suspended user named by `value` in `parameter`. */
    const suspended = (value: string, parameter: string) => ({
      detail: `User has been suspended: [${value}].`,
      title: 'Forbidden',
      resource_type: 'user',
      type: 'https://api.twitter.com/2/problems/resource-not-found',
      value,
      parameter,
      resource_id: value,
    })
    const one = await get(`/2/users/${erin.id}`)
    assertXSchema('Get2UsersIdResponse', one.body)
    expect(one.body.errors).toEqual([suspended(erin.id, 'id')])
    const named = await get(`/2/users/by?usernames=${erin.username},${alice.username}`)
    assertXSchema('Get2UsersByResponse', named.body)
    expect(ids(named.body)).toEqual([alice.id])
    expect(named.body.errors).toEqual([suspended(erin.username, 'usernames')])
  })

  it('the tree keeps placeholders with their replies under them', async () => {
    const { body } = await get(`/2/conversations/${root.id}?tweet.fields=author_id`)
    const byId = new Map<string, any>(body.data.map((p: { id: string }) => [p.id, p]))
    expect(byId.get(mid.id)).toEqual({
      id: mid.id,
      thread: expect.objectContaining({ depth: 1, parent_id: root.id, withdrawn: 'deleted' }),
    })
    expect(byId.get(byCarol.id)).toEqual({
      id: byCarol.id,
      thread: expect.objectContaining({ withdrawn: 'unavailable' }),
    })
    expect(byId.get(underMid.id).thread).toMatchObject({ depth: 2, parent_id: mid.id })
    expect(byId.get(underCarol.id).thread).toMatchObject({ depth: 2, parent_id: byCarol.id })
    expect(byId.get(underMid.id).text).toBe('a reply below the deleted one')
    expect(JSON.stringify(body)).not.toContain(SECRET)
    // The structure still counts them.
    const metrics = await get(`/2/conversations/${root.id}/metrics`)
    expect(metrics.body.data.post_count).toBe(6)
  })

  it('exports: jsonl and csv leave them out, graphml keeps the node without text', async () => {
    const jsonl = await get(`/2/conversations/${root.id}/export?format=jsonl`)
    const lines = jsonl.text
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, any>)
    const exported = lines.map((l) => l.data?.id ?? l.id)
    expect(exported).toHaveLength(3)
    expect(jsonl.text).not.toContain(SECRET)
    for (const id of [mid.id, byCarol.id, byDave.id]) expect(exported).not.toContain(id)
    const csv = await get(`/2/conversations/${root.id}/export?format=csv`)
    expect(csv.text.trim().split('\r\n')).toHaveLength(4)
    for (const id of [mid.id, byCarol.id, byDave.id]) expect(csv.text).not.toContain(`\r\n${id},`)
    const graphml = await get(`/2/conversations/${root.id}/export?format=graphml`)
    expect(graphml.text).toMatch(
      new RegExp(`<node id="${mid.id}">[^\\n]*<data key="withdrawn">deleted</data>`),
    )
    expect(graphml.text).toMatch(
      new RegExp(`<node id="${byCarol.id}">[^\\n]*<data key="withdrawn">unavailable</data>`),
    )
    expect(graphml.text).toContain(`<edge source="${underMid.id}" target="${mid.id}">`)
    expect(graphml.text).not.toContain(SECRET)
    expect(graphml.text).not.toContain('carol speaks')
  })

  it('the stream replay (backfill_minutes) never carries them', async () => {
    const stream = await openRawStream(api.url(), token, 'backfill_minutes=5', env)
    expect(stream.status).toBe(200)
    await waitFor('the replay', () => stream.messages.length >= 3)
    const replayed = stream.messages.map((m) => m.data.id as string)
    expect(new Set(replayed)).toEqual(new Set([root.id, underMid.id, underCarol.id]))
    expect(stream.lines.join('\n')).not.toContain(SECRET)
    stream.close()
  })

  it('the live stream does not deliver a Post withdrawn after it was published', async () => {
    const stream = await openRawStream(api.url(), token, '', env)
    expect(stream.status).toBe(200)
    // As a relay publishing late would: a hidden Post and a visible one in one entry.
    const entry = (line: string) => {
      const data = (JSON.parse(line) as { data: { id: string } }).data
      return { type: 'post' as const, id: data.id, body: JSON.stringify({ data }) }
    }
    await publishStored(env.redis, env.prefix, [entry(byDave.line), entry(underMid.line)], 600_000)
    await waitFor('the visible Post delivered', () => stream.messages.length >= 1)
    expect(stream.messages.map((m) => m.data.id)).toEqual([underMid.id])
    stream.close()
  })

  it("withheld Posts and users are served with X's withheld field", async () => {
    await applyComplianceEvents(env.db, [
      event({ kind: 'tweet', id: root.id, action: 'withheld', withheldInCountries: ['DE', 'FR'] }),
      event({ kind: 'user', id: alice.id, action: 'user_withheld', withheldInCountries: ['TR'] }),
    ])
    const withheld = { copyright: false, country_codes: ['DE', 'FR'] }
    // Both hydrations: the JSON text Postgres writes, and the objects (with expansions).
    const text = await get(`/2/tweets?ids=${root.id}&tweet.fields=withheld`)
    assertXSchema('Get2TweetsResponse', text.body)
    expect(text.body.data[0].withheld).toEqual(withheld)
    const objects = await get(
      `/2/tweets?ids=${root.id}&tweet.fields=withheld&expansions=author_id&user.fields=withheld`,
    )
    assertXSchema('Get2TweetsResponse', objects.body)
    expect(objects.body.data[0].withheld).toEqual(withheld)
    expect(objects.body.includes.users[0].withheld).toEqual({
      country_codes: ['TR'],
      scope: 'user',
    })
    const user = await get(`/2/users/${alice.id}?user.fields=withheld`)
    assertXSchema('Get2UsersIdResponse', user.body)
    expect(user.body.data.withheld).toEqual({ country_codes: ['TR'], scope: 'user' })
  })

  it('the un-events show hidden Posts again; the deleted one stays deleted', async () => {
    const again = await applyComplianceEvents(env.db, [
      event({ kind: 'user', id: carol.id, action: 'user_unprotect', eventAt: at(4) }),
      event({ kind: 'tweet', id: byDave.id, action: 'undrop', eventAt: at(5) }),
      // An undrop cannot bring back a deleted Post.
      event({ kind: 'tweet', id: mid.id, action: 'undrop', eventAt: at(6) }),
    ])
    expect(again.applied).toBe(3)
    const { body } = await get(`/2/tweets?ids=${mid.id},${byCarol.id},${byDave.id}`)
    expect(ids(body)).toEqual([byCarol.id, byDave.id])
    expect(body.errors).toEqual([expect.objectContaining({ resource_id: mid.id })])
    expect(ids((await get(`/2/users?ids=${carol.id}`)).body)).toEqual([carol.id])
    const search = await get(`/2/tweets/search/recent?query=conversation_id:${root.id}`)
    expect(search.body.meta.result_count).toBe(5)
    const counts = await get(
      `/2/tweets/counts/recent?query=conversation_id:${root.id}&granularity=day`,
    )
    expect(counts.body.meta.total_tweet_count).toBe(5)
    expect(ids((await get(`/2/users/${dave.id}/tweets`)).body)).toEqual([byDave.id])
    const tree = await get(`/2/conversations/${root.id}`)
    expect(tree.body.data.find((p: { id: string }) => p.id === byCarol.id).text).toBe(
      'carol speaks before she protects her account',
    )
    // The replay carries them again (a hidden Post was never erased from it).
    const replay = await openRawStream(api.url(), token, 'backfill_minutes=5', env)
    await waitFor('the replay', () => replay.messages.length >= 5)
    expect(new Set(replay.messages.map((m) => m.data.id as string))).toEqual(
      new Set([root.id, byCarol.id, byDave.id, underMid.id, underCarol.id]),
    )
    replay.close()
    // A copy of the deleted Post arriving again brings nothing back.
    await store(env, writer, [mid.line])
    expect(await tablesHolding(SECRET)).toEqual([])
    expect(await redisKeysHolding(SECRET)).toEqual([])
  })
})
