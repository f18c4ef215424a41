import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createDb,
  postsByIds,
  searchPosts,
  searchWirePosts,
  sql,
  wirePostsByIds,
  type Db,
  type PostCondition,
} from '@threadline/db'
import { shapePost, TWEET_FIELDS } from '@threadline/domain'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import { storeLines } from '@threadline/testing/api'

// The read API answers requests without expansions from wirePostsByIds/searchWirePosts (JSON text
// built by Postgres) and all others from postsByIds + shapePost. The two must agree on every Post
// and every field list, key order included.

let env: TestEnv
let ids: string[]
const conv = generateConversation({ size: 30, seed: 11, padding: true })

const line = (data: Record<string, unknown>) => JSON.stringify({ data })

beforeAll(async () => {
  env = await createTestEnv()
  await storeLines(env.db, conv.lines)
  await storeLines(env.db, [
    // No edit history, no author column, odd text.
    line({
      id: '1900000000000000001',
      text: 'quotes " and \\ backslashes, tabs\t, emoji 🧵 and \u2028 separators',
      created_at: '2025-03-01T00:00:00.123Z',
    }),
    // An empty edit history, explicit nulls and empty members the upstream sent.
    line({
      id: '1900000000000000002',
      text: 'nulls',
      author_id: '42',
      conversation_id: '1900000000000000002',
      created_at: '2025-03-01T00:00:01Z',
      edit_history_tweet_ids: [],
      geo: null,
      lang: 'und',
      possibly_sensitive: false,
      public_metrics: { like_count: 0, retweet_count: 0, reply_count: 0, quote_count: 0 },
      entities: { hashtags: [{ start: 0, end: 5, tag: 'ünï' }] },
      withheld: { copyright: false, country_codes: ['DE'] },
      context_annotations: [{ domain: { id: '1', name: 'd' }, entity: { id: '2', name: 'e' } }],
    }),
  ])
  const rows = await sql<{ id: string }>`SELECT id FROM posts ORDER BY id`.execute(env.db)
  ids = rows.rows.map((r) => r.id)
})
afterAll(() => env?.close())

/** A deterministic shuffle, so field order (which the wire keeps) is exercised too. */
function shuffled<T>(items: readonly T[], seed: number): T[] {
  const out = [...items]
  let s = seed
  for (let i = out.length - 1; i > 0; i--) {
    s = (s * 1103515245 + 12345) % 2 ** 31
    const j = s % (i + 1)
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

const FIELD_LISTS: string[][] = [
  [],
  ...TWEET_FIELDS.map((f) => [f]),
  [...TWEET_FIELDS],
  ...[1, 2, 3, 4, 5].map((seed) => shuffled(TWEET_FIELDS, seed).slice(0, 3 + seed * 4)),
]

describe('Posts as wire JSON text', () => {
  it('match shapePost for every stored Post and field list, key order included', async () => {
    expect(ids.length).toBe(32)
    const stored = new Map((await postsByIds(env.db, ids)).map((p) => [p.id, p]))
    for (const fields of FIELD_LISTS) {
      const texts = await wirePostsByIds(env.db, ids, fields)
      expect(texts.map((t) => t.id).sort()).toEqual([...ids].sort())
      for (const t of texts) {
        const expected = JSON.stringify(shapePost(stored.get(t.id)!, new Set(fields)))
        expect(JSON.stringify(JSON.parse(t.json)), `${t.id} ${fields.join(',')}`).toBe(expected)
      }
    }
  })

  it('search pages agree with searchPosts, page by page', async () => {
    const condition = () => sql<boolean>`true`
    const fields = ['created_at', 'public_metrics', 'author_id', 'edit_history_tweet_ids']
    let beforeId: string | undefined
    let pages = 0
    for (;;) {
      const window = { limit: 7, beforeId }
      const objects = await searchPosts(env.db, condition, window)
      const texts = await searchWirePosts(env.db, condition, window, fields)
      expect(texts.more).toBe(objects.more)
      expect(texts.posts.map((p) => JSON.parse(p.json) as unknown)).toEqual(
        objects.posts.map((p) => shapePost(p, new Set(fields))),
      )
      pages++
      if (!objects.more) break
      beforeId = objects.posts.at(-1)!.id
    }
    expect(pages).toBe(5)
  })

  it('refuses a field name that is not a plain word (it becomes SQL)', async () => {
    await expect(wirePostsByIds(env.db, ids, ["lang') --"])).rejects.toThrow(/not a Post field/)
  })
})

describe('prepared statements', () => {
  const preparedOn = async (preparedStatements: boolean, run: (db: Db) => Promise<unknown>) => {
    const db = createDb({ url: env.databaseUrl, poolMax: 1, preparedStatements })
    try {
      await run(db)
      // The pool's one connection: the one that ran the statements.
      const { rows } = await sql<{ statement: string }>`
        SELECT statement FROM pg_prepared_statements`.execute(db)
      return rows.map((r) => r.statement)
    } finally {
      await db.destroy()
    }
  }

  it('run lookups and one conversation by name, other searches unnamed', async () => {
    const fields = ['created_at', 'lang']
    const conversation = (eb: Parameters<PostCondition>[0]) =>
      eb('conversation_id', '=', conv.rootId)
    const statements = await preparedOn(true, async (db) => {
      await wirePostsByIds(db, ids, fields)
      await wirePostsByIds(db, ids.slice(0, 2), fields)
      await searchWirePosts(db, conversation, { limit: 5, prepared: true }, fields)
      await searchWirePosts(db, () => sql<boolean>`lang = 'es'`, { limit: 5 }, fields)
    })
    expect(statements).toHaveLength(2)
    expect(statements.some((s) => s.includes('unnest('))).toBe(true)
    expect(statements.some((s) => s.includes('"conversation_id" ='))).toBe(true)
    expect(statements.some((s) => s.includes("'es'"))).toBe(false)
  })

  it('are not used when turned off', async () => {
    expect(await preparedOn(false, (db) => wirePostsByIds(db, ids, ['lang']))).toEqual([])
  })
})
