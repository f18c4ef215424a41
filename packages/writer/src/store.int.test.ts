import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { createDb, storeBatch, sql } from '@threadline/db'
import { normalizeLines, type PostRow } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { generateConversation, prng, shuffle, waitFor } from '@threadline/testing'
import { RecentlyStored } from './recent.js'
import { storeLines } from './store-lines.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const observed = (n: number) => new Date(Date.UTC(2026, 10, 21, 0, 0, n)).toISOString()

async function snapshot(db: TestEnv['db']) {
  const posts =
    await sql`SELECT id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text, created_at, lang, retweet_count, like_count, raw FROM posts ORDER BY id`.execute(
      db,
    )
  const refs =
    await sql`SELECT * FROM post_references ORDER BY post_id, type, referenced_id`.execute(db)
  const users = await sql`SELECT id, name, username, raw FROM users ORDER BY id`.execute(db)
  const conversations =
    await sql`SELECT id, root_post_id, post_count, reply_count, first_created_at, last_created_at FROM conversations ORDER BY id`.execute(
      db,
    )
  return {
    posts: posts.rows,
    refs: refs.rows,
    users: users.rows,
    conversations: conversations.rows,
  }
}

async function reset(db: TestEnv['db']) {
  await sql`TRUNCATE posts, post_references, users, conversations, outbox, ingest_rejects`.execute(
    db,
  )
}

describe('storeBatch', () => {
  it('stores a thread in order and shuffled with duplicates to the same rows and counters', async () => {
    const { lines, rootId } = generateConversation({ size: 3000, seed: 7 })
    const random = prng(99)

    await reset(env.db)
    for (let i = 0; i < lines.length; i += 500) {
      await storeLines(env.db, lines.slice(i, i + 500), observed(1), 'test')
    }
    const inOrder = await snapshot(env.db)
    expect(inOrder.posts).toHaveLength(3000)
    expect(inOrder.conversations).toEqual([
      expect.objectContaining({
        id: rootId,
        root_post_id: rootId,
        post_count: 3000,
        reply_count: 2999,
      }),
    ])

    await reset(env.db)
    // Every line twice, shuffled, in overlapping batches of varied sizes: replies before parents.
    const shuffled = shuffle([...lines, ...lines.slice(0, 1500), ...lines], random)
    for (let i = 0; i < shuffled.length;) {
      const n = 1 + Math.floor(random() * 700)
      await storeLines(env.db, shuffled.slice(i, i + n), observed(1), 'test')
      i += n
    }
    expect(await snapshot(env.db)).toEqual(inOrder)
  })

  it('is idempotent: a batch applied twice leaves the same rows and one outbox entry', async () => {
    await reset(env.db)
    const { lines } = generateConversation({ size: 50, seed: 3 })
    const first = await storeLines(env.db, lines, observed(1), 'test')
    const before = await snapshot(env.db)
    const second = await storeLines(env.db, lines, observed(1), 'test')
    expect(first.inserted).toBe(50)
    expect(second).toEqual({ inserted: 0, updated: 0, users: 0, rejects: 0, fresh: [] })
    // What the first call stored is ready to publish: one entry per new Post.
    expect(first.fresh).toHaveLength(1)
    expect(first.fresh[0]!.entries.map((e) => e.id).sort()).toEqual(
      [...first.fresh[0]!.payload.post_ids].sort(),
    )
    // Each entry's body is the Post with its author, as the stream hub reads it.
    for (const entry of first.fresh[0]!.entries) {
      expect(JSON.parse(entry.body)).toMatchObject({
        data: { id: entry.id },
        author: { id: expect.any(String) },
      })
    }
    expect(await snapshot(env.db)).toEqual(before)
    const outbox = await env.db.selectFrom('outbox').select('payload').execute()
    expect(outbox).toHaveLength(1)
    expect(outbox[0]!.payload.post_ids).toHaveLength(50)
  })

  it('lets a newer copy replace metrics and never lets an older one overwrite it', async () => {
    await reset(env.db)
    const post = (likes: number) =>
      JSON.stringify({
        data: {
          id: '1860000000000000001',
          text: 'hello',
          created_at: '2026-11-20T10:00:00.123Z',
          conversation_id: '1860000000000000001',
          public_metrics: { retweet_count: 0, reply_count: 0, like_count: likes, quote_count: 0 },
        },
      })
    await storeLines(env.db, [post(5)], observed(10), 'test')
    await storeLines(env.db, [post(9)], observed(20), 'test')
    await storeLines(env.db, [post(1)], observed(15), 'test')
    const row = await env.db
      .selectFrom('posts')
      .select(['like_count', 'created_at'])
      .executeTakeFirstOrThrow()
    expect(row.like_count).toBe(9)
    expect(row.created_at.toISOString()).toBe('2026-11-20T10:00:00.123Z')
    const conv = await env.db.selectFrom('conversations').selectAll().executeTakeFirstOrThrow()
    expect(conv.post_count).toBe(1)
  })

  // The writer sends the statement only what it did not store lately (RecentlyStored); the
  // outcome must be the statement's own, with and without that memory.
  const memories = [
    ['alone', () => undefined],
    ['with the writer memory', () => new RecentlyStored()],
  ] as const

  it.each(memories)(
    'lets an included copy refresh a stored Post at most once a minute (%s)',
    async (_, memory) => {
      const recent = memory()
      await reset(env.db)
      const parent = (likes: number) => ({
        id: '1860000000000000020',
        text: 'a root',
        created_at: '2026-11-20T10:00:00.000Z',
        conversation_id: '1860000000000000020',
        public_metrics: { retweet_count: 0, reply_count: 0, like_count: likes, quote_count: 0 },
      })
      const reply = (n: number, likes: number) =>
        JSON.stringify({
          data: {
            id: String(1860000000000000100n + BigInt(n)),
            text: `reply ${n}`,
            conversation_id: '1860000000000000020',
            created_at: '2026-11-20T10:01:00.000Z',
            referenced_tweets: [{ type: 'replied_to', id: '1860000000000000020' }],
          },
          includes: { tweets: [parent(likes)] },
        })
      const likes = async () =>
        (
          await env.db
            .selectFrom('posts')
            .select('like_count')
            .where('id', '=', '1860000000000000020')
            .executeTakeFirstOrThrow()
        ).like_count
      const at = (s: number) => new Date(Date.UTC(2026, 10, 21, 0, 0, s)).toISOString()
      await storeLines(env.db, [JSON.stringify({ data: parent(1) })], at(0), 'test', { recent })
      await storeLines(env.db, [reply(1, 5)], at(10), 'test', { recent })
      expect(await likes()).toBe(1) // included copy within the minute: not rewritten
      await storeLines(env.db, [reply(2, 7)], at(70), 'test', { recent })
      expect(await likes()).toBe(7) // more than a minute newer: refreshed
      await storeLines(env.db, [JSON.stringify({ data: parent(9) })], at(71), 'test', { recent })
      expect(await likes()).toBe(9) // a primary copy always applies
      const conv = await env.db.selectFrom('conversations').selectAll().executeTakeFirstOrThrow()
      expect(conv).toMatchObject({ post_count: 3, reply_count: 2 })
    },
  )

  it.each(memories)('records a changed user name in the outbox (%s)', async (_, memory) => {
    const recent = memory()
    await reset(env.db)
    const line = (name: string) =>
      JSON.stringify({
        data: { id: '1860000000000000002', text: 'x', author_id: '42' },
        includes: { users: [{ id: '42', name, username: 'someone' }] },
      })
    await storeLines(env.db, [line('Before')], observed(1), 'test', { recent })
    await storeLines(env.db, [line('After')], observed(2), 'test', { recent })
    const payloads = (
      await env.db.selectFrom('outbox').select('payload').orderBy('id').execute()
    ).map((r) => r.payload)
    expect(payloads[1]!.user_changes).toEqual([
      {
        id: '42',
        before: { name: 'Before', username: 'someone' },
        after: { name: 'After', username: 'someone' },
      },
    ])
  })

  it('neither locks nor rewrites a stored user that a later line carries unchanged', async () => {
    await reset(env.db)
    const line = (id: string, name: string) =>
      JSON.stringify({
        data: { id, text: 'x', author_id: '42' },
        includes: { users: [{ id: '42', name, username: 'someone' }] },
      })
    const row = () =>
      sql<{ xmin: string; xmax: string; name: string }>`
        SELECT xmin::text, xmax::text, name FROM users WHERE id = 42`
        .execute(env.db)
        .then((r) => r.rows[0]!)
    await storeLines(env.db, [line('1860000000000000002', 'Same')], observed(1), 'test')
    const first = await row()
    // Seen again within the minute, unchanged: an ON CONFLICT DO UPDATE whose WHERE fails still
    // locks the row (xmax set), and a concurrent batch by the same author would wait on that lock.
    const again = await storeLines(
      env.db,
      [line('1860000000000000003', 'Same')],
      observed(2),
      'test',
    )
    expect(again).toMatchObject({ inserted: 1, users: 0 })
    expect(await row()).toEqual({ ...first, xmax: '0' })
    // A new name still applies at once.
    await storeLines(env.db, [line('1860000000000000004', 'Other')], observed(3), 'test')
    expect(await row()).toMatchObject({ name: 'Other' })
    expect((await row()).xmin).not.toBe(first.xmin)
  })

  it('keeps malformed lines in ingest_rejects and stores the rest of the batch', async () => {
    await reset(env.db)
    const good = generateConversation({ size: 5, seed: 5 }).lines
    const bad = [
      'not json at all',
      JSON.stringify({ data: { text: 'no id' } }),
      JSON.stringify({ data: { id: '12x', text: 'bad id' } }),
      JSON.stringify({ data: { id: '12345678901234567890', text: 'too long' } }),
      JSON.stringify({
        data: { id: '1860000000000000003', text: 'bad time', created_at: 'yesterday' },
      }),
      JSON.stringify({ data: { id: '1860000000000000004', text: 'nul \u0000 inside' } }),
      JSON.stringify({
        data: { id: '1860000000000000005', text: 'huge', public_metrics: { like_count: 1e12 } },
      }),
      JSON.stringify([1, 2, 3]),
    ]
    const result = await storeLines(
      env.db,
      [...good.slice(0, 2), ...bad, ...good.slice(2)],
      observed(1),
      'test',
    )
    expect(result.inserted).toBe(5)
    expect(result.rejects).toBe(bad.length)
    const rejects = await env.db
      .selectFrom('ingest_rejects')
      .select(['reason', 'raw', 'source'])
      .orderBy('id')
      .execute()
    expect(rejects.map((r) => r.reason)).toEqual([
      expect.stringMatching(/^not JSON/),
      'Post has no id',
      expect.stringMatching(/id "12x" is not 1-19 digits/),
      expect.stringMatching(/is not 1-19 digits/),
      expect.stringMatching(/created_at "yesterday" is not a time/),
      expect.stringMatching(/\\u0000/),
      expect.stringMatching(/like_count/),
      'not a Post, stream line or response page',
    ])
    expect(rejects[0]!.raw).toBe('not json at all')
    expect(rejects[5]!.raw).toContain('\\u0000')
  })

  it('isolates a row Postgres refuses and stores the rest', async () => {
    await reset(env.db)
    const good = generateConversation({ size: 8, seed: 8 }).lines
    // Valid to the normaliser, refused by Postgres: a year the timestamptz range does not hold.
    const refused = JSON.stringify({
      data: {
        id: '1860000000000000006',
        text: 'far future',
        created_at: '9999-12-31T23:59:59.999+14:00',
      },
    })
    const result = await storeLines(
      env.db,
      [...good.slice(0, 4), refused, ...good.slice(4)],
      observed(1),
      'test',
    )
    expect(result.inserted + result.rejects).toBe(9)
    expect(await env.db.selectFrom('posts').select('id').execute()).toHaveLength(result.inserted)
  })

  it('stores a line decoded from bytes that are not all UTF-8 as that text', async () => {
    await reset(env.db)
    // A stray 0xff, and a 4-byte sequence cut after 3 bytes (decoded to one U+FFFD of 3 bytes, so
    // the text is as long as the bytes were).
    const bad = Buffer.from([0x61, 0xff, 0x62, 0xf0, 0x9f, 0x98, 0x63])
    const line = Buffer.concat([
      Buffer.from('{"data":{"id":"1860000000000000007","text":"'),
      bad,
      Buffer.from('"},"includes":{"users":[{"id":"1860000000000000001","name":"'),
      bad,
      Buffer.from('","username":"u"}]}}'),
    ])
    // As addPostsBatch queues bytes: decoded, each bad sequence a U+FFFD.
    const result = await storeLines(env.db, [line.toString('utf8')], observed(1), 'test')
    expect(result).toMatchObject({ inserted: 1, rejects: 0 })
    const text = bad.toString('utf8')
    const post = await env.db.selectFrom('posts').select(['text', 'raw']).executeTakeFirstOrThrow()
    expect(post.text).toBe(text)
    expect((post.raw as { text: string }).text).toBe(text)
    const user = await env.db.selectFrom('users').select('name').executeTakeFirstOrThrow()
    expect(user.name).toBe(text)
  })

  it('stores concurrent batches that carry the same parent, the parent once', async () => {
    await reset(env.db)
    const parent = {
      id: '1860000000000000100',
      text: 'parent',
      conversation_id: '1860000000000000100',
      author_id: '1860000000000000001',
    }
    // A reply that carries its parent in includes, as every reply of a busy thread does.
    const reply = (id: string) =>
      JSON.stringify({
        data: {
          id,
          text: `reply ${id}`,
          conversation_id: parent.id,
          author_id: '1860000000000000002',
          referenced_tweets: [{ type: 'replied_to', id: parent.id }],
        },
        includes: { tweets: [parent] },
      })
    // Both statements stop at the outbox while it is locked: neither commits before the other
    // has inserted its Posts, so each meets the other's uncommitted copy of the parent.
    const locker = createDb({ url: env.databaseUrl, poolMax: 1 })
    let unlock!: () => void
    const unlocked = new Promise<void>((resolve) => (unlock = resolve))
    let locked!: () => void
    const isLocked = new Promise<void>((resolve) => (locked = resolve))
    const holding = locker.transaction().execute(async (trx) => {
      await sql`LOCK TABLE outbox IN SHARE MODE`.execute(trx)
      locked()
      await unlocked
    })
    try {
      await isLocked
      const a = storeLines(env.db, [reply('1860000000000000101')], observed(1), 'test')
      const b = storeLines(env.db, [reply('1860000000000000102')], observed(2), 'test')
      await waitFor('a statement waiting on the outbox', async () => {
        const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_locks
          WHERE relation = 'outbox'::regclass AND NOT granted`.execute(env.db)
        return rows[0]!.n >= 1
      })
      unlock()
      await holding
      const [first, second] = await Promise.all([a, b])
      expect(first!.inserted + second!.inserted).toBe(3)
      const ids = (await env.db.selectFrom('posts').select('id').orderBy('id').execute()).map(
        (r) => r.id,
      )
      expect(ids).toEqual([parent.id, '1860000000000000101', '1860000000000000102'])
      const conv = await env.db.selectFrom('conversations').selectAll().executeTakeFirstOrThrow()
      expect(conv).toMatchObject({ root_post_id: parent.id, post_count: 3, reply_count: 2 })
      // Published once: in the outbox of the batch that inserted it.
      const published = [...first!.fresh, ...second!.fresh].flatMap((f) => f.payload.post_ids)
      expect(published.sort()).toEqual([parent.id, '1860000000000000101', '1860000000000000102'])
    } finally {
      unlock()
      await holding.catch(() => undefined)
      await locker.destroy()
    }
  })

  it('stores Posts found in includes.tweets and pages of twarc2 output', async () => {
    await reset(env.db)
    const page = {
      data: [
        {
          id: '1860000000000000010',
          text: 'quoting',
          conversation_id: '1860000000000000010',
          referenced_tweets: [{ type: 'quoted', id: '1860000000000000009' }],
        },
      ],
      includes: {
        tweets: [
          { id: '1860000000000000009', text: 'quoted one', conversation_id: '1860000000000000009' },
        ],
      },
      meta: { result_count: 1 },
      __twarc: { url: 'https://api.twitter.com/2/tweets/search/all', version: '2.14.0' },
    }
    await storeBatch(env.db, normalizeLines([JSON.stringify(page)], observed(1)), 'test')
    const ids = (await env.db.selectFrom('posts').select('id').orderBy('id').execute()).map(
      (r) => r.id,
    )
    expect(ids).toEqual(['1860000000000000009', '1860000000000000010'])
    const refs = await env.db.selectFrom('post_references').selectAll().execute()
    expect(refs).toEqual([
      { post_id: '1860000000000000010', type: 'quoted', referenced_id: '1860000000000000009' },
    ])
  })

  it('stores in each column what normalizeLines made of the Post, whatever its shape', async () => {
    await reset(env.db)
    // The statement reads most columns out of `raw`: this holds them equal to the PostRow fields.
    let next = 1_860_000_000_000_100_000n
    const optional = <T>(arb: fc.Arbitrary<T>) => fc.option(arb, { nil: undefined })
    const count = fc.oneof(fc.nat({ max: 2_147_483_647 }), fc.constant(null))
    await fc.assert(
      fc.asyncProperty(
        fc.record({
          text: fc.string({ unit: 'binary' }).filter((t) => !t.includes('\u0000')),
          lang: optional(fc.string({ maxLength: 5 }).filter((t) => !t.includes('\u0000'))),
          conversation: fc.constantFrom('self', 'null', 'absent'),
          createdAt: fc.boolean(),
          likes: optional(count),
          impressions: optional(fc.oneof(fc.maxSafeNat(), fc.constant(100))),
          // JSON may write an integer as 25.0 or 1e2; the cast must take both.
          floatForm: fc.boolean(),
          reply: fc.boolean(),
          // twarc2's flattened Posts carry `author` and references with their Posts inline.
          twarc: fc.boolean(),
        }),
        async (shape) => {
          next += 10n
          const id = String(next)
          const parent = String(next - 1n)
          const metrics =
            shape.likes === undefined && shape.impressions === undefined
              ? undefined
              : {
                  ...(shape.likes === undefined ? {} : { like_count: shape.likes }),
                  ...(shape.impressions === undefined
                    ? {}
                    : { impression_count: shape.impressions }),
                }
          const post = {
            id,
            text: shape.text,
            ...(shape.lang === undefined ? {} : { lang: shape.lang }),
            ...(shape.conversation === 'absent'
              ? {}
              : { conversation_id: shape.conversation === 'self' ? id : null }),
            ...(shape.createdAt ? { created_at: '2026-11-20T10:00:00.000Z' } : {}),
            ...(metrics ? { public_metrics: metrics } : {}),
            ...(shape.reply
              ? {
                  in_reply_to_user_id: '7',
                  referenced_tweets: [
                    shape.twarc
                      ? {
                          type: 'replied_to',
                          id: parent,
                          text: 'parent',
                          author: { id: '7', name: 'p', username: 'q' },
                        }
                      : { type: 'replied_to', id: parent },
                  ],
                }
              : {}),
            ...(shape.twarc ? { author: { id: '8', name: 'n', username: 'u' } } : {}),
          }
          let line = JSON.stringify(shape.twarc ? post : { data: post })
          if (shape.floatForm && typeof shape.likes === 'number') {
            line = line.replace(`"like_count":${shape.likes}`, `"like_count":${shape.likes}.0`)
          }
          if (shape.floatForm && shape.impressions === 100) {
            line = line.replace('"impression_count":100', '"impression_count":1e2')
          }
          const batch = normalizeLines([line], observed(1))
          const row = batch.posts.find((p) => p.id === id)!
          expect(batch.rejects).toEqual([])
          await storeBatch(env.db, batch, 'test')
          const stored = await env.db
            .selectFrom('posts')
            .select([
              'id',
              'conversation_id',
              'author_id',
              'in_reply_to_user_id',
              'in_reply_to_post_id',
              'text',
              'lang',
              'retweet_count',
              'reply_count',
              'like_count',
              'quote_count',
              'bookmark_count',
              'impression_count',
              'search_terms',
              'raw',
            ])
            .select(sql<string>`to_json(created_at)#>>'{}'`.as('created_at'))
            .select(sql<string>`to_json(observed_at)#>>'{}'`.as('observed_at'))
            .where('id', '=', id)
            .executeTakeFirstOrThrow()
          const expected: Partial<PostRow> = { ...row }
          delete expected.refs
          delete expected.included
          expect({
            ...stored,
            created_at: new Date(stored.created_at).toISOString(),
            observed_at: new Date(stored.observed_at).toISOString(),
          }).toEqual({
            ...expected,
            raw: JSON.parse(JSON.stringify(row.raw)),
          })
          const refs = await env.db
            .selectFrom('post_references')
            .select(['type', 'referenced_id'])
            .where('post_id', '=', id)
            .execute()
          // Replies are found by posts.in_reply_to_post_id: only quotes and retweets get a row.
          expect(refs).toEqual(
            row.refs
              .filter((r) => r.type !== 'replied_to')
              .map((r) => ({ type: r.type, referenced_id: r.id })),
          )
        },
      ),
      { numRuns: 60 },
    )
  })

  it('stores every search term array as normalizeLines made it, whatever its text', async () => {
    await reset(env.db)
    // Quotes, backslashes, braces, commas, spaces, empty strings and the word NULL stay text.
    const term = fc.oneof(
      fc.string({ unit: 'binary' }).filter((t) => !t.includes('\u0000')),
      fc.constantFrom('NULL', 'null', '', ' ', '{', '}', ',', '"', '\\', 'a b', '\\"'),
    )
    const [post] = normalizeLines(
      [JSON.stringify({ data: { id: '1860000000000000200', text: 'x' } })],
      observed(1),
    ).posts
    let n = 0
    await fc.assert(
      fc.asyncProperty(fc.array(term, { maxLength: 30 }), async (terms) => {
        n += 1
        const row = { ...post!, observed_at: new Date(Date.UTC(2026, 10, 21) + n).toISOString() }
        const batch = { posts: [{ ...row, search_terms: terms }], users: [], rejects: [], empty: 0 }
        await storeBatch(env.db, batch, 'test')
        const stored = await env.db
          .selectFrom('posts')
          .select('search_terms')
          .where('id', '=', post!.id)
          .executeTakeFirstOrThrow()
        expect(stored.search_terms).toEqual(terms)
      }),
      { numRuns: 300 },
    )
  })
})
