import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiDepsFromConfig, apiOptionsFromConfig, createApi, type ApiServer } from '@threadline/api'
import { loadConfig } from '@threadline/config'
import {
  assertSchemaCurrent,
  createApp,
  createDb,
  createSchema,
  migrateToLatest,
  sql,
  storeBatch,
  withSearchPath,
  type Db,
} from '@threadline/db'
import { normalizeLines } from '@threadline/domain'
import {
  createTestEnv,
  generateConversation,
  waitFor,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { startLocalPgReplica, type LocalPgReplica } from './local-pg-replica.js'

/*
 * The API with DATABASE_READ_URL on a real streaming replica (pg_basebackup -R of a primary this
 * file starts). Pausing WAL replay on the replica makes the two databases differ on purpose: what
 * the API then answers shows which one each route read.
 */

let env: TestEnv
let pg: LocalPgReplica
let primary: Db
let replica: Db
let token: string
const schema = `t_replica_${randomBytes(4).toString('hex')}`

async function startApi(readFromReplica: boolean): Promise<ApiServer> {
  const config = loadConfig({
    ...env.env,
    DATABASE_URL: withSearchPath(pg.primaryUrl, schema),
    ...(readFromReplica ? { DATABASE_READ_URL: withSearchPath(pg.replicaUrl, schema) } : {}),
    PORT: '0',
  })
  const server = createApi(
    await apiDepsFromConfig(config, env.logger),
    apiOptionsFromConfig(config),
  )
  env.defer(() => server.close())
  await server.app.ready()
  return server
}

async function get(server: ApiServer, url: string) {
  const res = await server.app.inject({
    method: 'GET',
    url,
    headers: { authorization: `Bearer ${token}` },
  })
  expect(res.statusCode).toBe(200)
  return res.json<Record<string, unknown>>()
}

const count = async (db: Db, table: 'posts' | 'stream_rules') =>
  Number(
    (await sql<{ n: string }>`SELECT count(*) AS n FROM ${sql.table(table)}`.execute(db)).rows[0]!
      .n,
  )

async function store(db: Db, lines: string[]) {
  await storeBatch(db, normalizeLines(lines, new Date().toISOString()), 'test')
}

beforeAll(async () => {
  env = await createTestEnv()
  pg = await startLocalPgReplica()
  await createSchema(pg.primaryUrl, schema)
  primary = createDb({ url: withSearchPath(pg.primaryUrl, schema), poolMax: 3 })
  replica = createDb({ url: withSearchPath(pg.replicaUrl, schema), poolMax: 3 })
  await migrateToLatest(primary)
  await waitFor('the replica to replay the migrations', async () => {
    await assertSchemaCurrent(replica)
    return true
  })
  token = (await createApp(primary, 'replica test')).bearer_token
})

afterAll(async () => {
  // Replay may still be paused if a test failed half-way; the servers stop either way.
  await env?.close()
  await primary?.destroy()
  await replica?.destroy()
  await pg?.stop()
})

describe('API with a read replica (DATABASE_READ_URL)', () => {
  it('reads Posts from the replica and rules from the primary', async () => {
    const withReplica = await startApi(true)
    const primaryOnly = await startApi(false)
    const startMs = Date.now() - 3_600_000
    const a = generateConversation({ size: 20, seed: 7, startMs })
    await store(primary, a.lines)
    await waitFor('the replica to have the first conversation', async () =>
      (await count(replica, 'posts')) === a.ids.length ? true : undefined,
    )
    const first = await get(withReplica, `/2/tweets?ids=${a.ids.slice(0, 3).join(',')}`)
    expect((first.data as unknown[]).length).toBe(3)

    // Freeze the replica: from here on it does not see what the primary commits.
    await sql`SELECT pg_wal_replay_pause()`.execute(replica)
    try {
      await waitFor('replay paused', async () => {
        const { rows } = await sql<{
          s: string
        }>`SELECT pg_get_wal_replay_pause_state() AS s`.execute(replica)
        return rows[0]!.s === 'paused' ? true : undefined
      })
      const b = generateConversation({ size: 10, seed: 8, startMs: startMs + 60_000 })
      await store(primary, b.lines)
      expect(await count(primary, 'posts')).toBe(a.ids.length + b.ids.length)
      expect(await count(replica, 'posts')).toBe(a.ids.length)

      // Lookup, search and counts answer from the replica: the new Post is not there yet…
      const lookup = await get(withReplica, `/2/tweets/${b.rootId}`)
      expect(lookup.data).toBeUndefined()
      expect(JSON.stringify(lookup.errors)).toContain('Could not find tweet')
      const query = encodeURIComponent(`conversation_id:${b.rootId}`)
      const search = await get(withReplica, `/2/tweets/search/all?query=${query}`)
      expect(search.meta).toEqual({ result_count: 0 })
      const counts = await get(withReplica, `/2/tweets/counts/recent?query=${query}`)
      expect((counts.meta as { total_tweet_count: number }).total_tweet_count).toBe(0)
      // …while an API without DATABASE_READ_URL reads the primary, which has it.
      expect(((await get(primaryOnly, `/2/tweets/${b.rootId}`)).data as { id: string }).id).toBe(
        b.rootId,
      )

      // Rules are read back from the primary at once (the replica cannot see them yet).
      const added = await withReplica.app.inject({
        method: 'POST',
        url: '/2/tweets/search/stream/rules',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        payload: { add: [{ value: `conversation_id:${b.rootId}`, tag: 'b' }] },
      })
      expect(added.statusCode).toBe(201)
      const rules = await get(withReplica, '/2/tweets/search/stream/rules')
      expect(rules.data).toEqual([
        expect.objectContaining({ value: `conversation_id:${b.rootId}`, tag: 'b' }),
      ])
      expect(await count(replica, 'stream_rules')).toBe(0)

      // The connections themselves: Post reads on the replica, under their own application_name.
      const sessions = async (db: Db) =>
        (
          await sql<{
            name: string
          }>`SELECT DISTINCT application_name AS name FROM pg_stat_activity WHERE application_name LIKE 'threadline-api%'`.execute(
            db,
          )
        ).rows
          .map((r) => r.name)
          .sort()
      expect(await sessions(replica)).toEqual(['threadline-api-read'])
      // The primary serves the rest (the filtered stream's LISTEN needs it too), never Post reads.
      const onPrimary = await sessions(primary)
      expect(onPrimary).toContain('threadline-api')
      expect(onPrimary).not.toContain('threadline-api-read')
    } finally {
      await sql`SELECT pg_wal_replay_resume()`.execute(replica)
    }

    // Once the replica catches up, the same reads find the new conversation.
    const b = generateConversation({ size: 10, seed: 8, startMs: startMs + 60_000 })
    const found = await waitForValue('the replica to catch up', async () => {
      const body = await get(withReplica, `/2/tweets/${b.rootId}`)
      return body.data ? (body.data as { id: string }) : undefined
    })
    expect(found.id).toBe(b.rootId)
    const query = encodeURIComponent(`conversation_id:${b.rootId}`)
    const search = await get(withReplica, `/2/tweets/search/all?query=${query}&max_results=100`)
    expect((search.meta as { result_count: number }).result_count).toBe(b.ids.length)
  })
  it('serves a conversation tree read on the replica as the replica replays it, within the staleness bound', async () => {
    const withReplica = await startApi(true)
    const c = generateConversation({ size: 40, seed: 9, startMs: Date.now() - 1_800_000 })
    const stored = async (n: number) =>
      waitFor(`the replica to hold ${n} Posts of the conversation`, async () => {
        const { rows } = await sql<{ n: string }>`
          SELECT count(*) AS n FROM posts WHERE conversation_id = ${c.rootId}`.execute(replica)
        return Number(rows[0]!.n) === n ? true : undefined
      })
    const tree = async (server: ApiServer) => {
      const body = await get(server, `/2/conversations/${c.rootId}?max_results=1000`)
      return {
        posts: (body.data as Array<{ id: string; thread: unknown }>).map((p) => [p.id, p.thread]),
        count: (body.meta as { post_count: number }).post_count,
      }
    }
    await store(primary, c.lines.slice(0, 30))
    await stored(30)
    expect((await tree(withReplica)).count).toBe(30)
    // Newer replies: the held tree is read again from the replica (docs/api.md §5.1).
    await store(primary, c.lines.slice(30))
    await stored(40)
    const forward = await waitForValue('the tree read again', async () => {
      const now = await tree(withReplica)
      return now.count === 40 ? now : undefined
    })
    expect(forward.count).toBe(40)
    // The same tree as a whole read by an API that held nothing.
    expect(forward).toEqual(await tree(await startApi(true)))
  })
})
