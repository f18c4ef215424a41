import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from 'kysely'
import { snowflakeAt } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { down as unpartition } from './migrations/20261128T120200-partitions.js'
import * as archiveReads from './migrations/20261128T120300-archive-reads.js'
import { convertToPartitioned, type ConversionProgress } from './partition-convert.js'
import { isPartitioned } from './partitions.js'
import { storeBatch } from './repositories/store-batch.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const SEEDED = 100_000
const DAY = 86_400_000

/** 100 k Posts over two years in conversations of 100, their counters and some quotes, in SQL. */
async function seed() {
  const firstId = BigInt(snowflakeAt(new Date(Date.now() - 700 * DAY)))
  const stepId = (BigInt(snowflakeAt(new Date(Date.now() - DAY))) - firstId) / BigInt(SEEDED)
  const first = sql`${firstId.toString()}::bigint`
  const step = sql`${stepId.toString()}::bigint`
  await sql`
    INSERT INTO posts (id, conversation_id, in_reply_to_post_id, text, created_at, raw,
      observed_at, search_terms)
    SELECT ${first} + g * ${step}, ${first} + (g / 100) * 100 * ${step},
      CASE WHEN g % 100 > 0 THEN ${first} + (g - 1) * ${step} END,
      'seeded ' || g, to_timestamp(1288834974.657 + ((${first} + g * ${step}) >> 22) / 1000.0),
      '{}', now(), ARRAY['seeded']
    FROM generate_series(0, ${SEEDED - 1}) g`.execute(env.db)
  await sql`INSERT INTO post_references (post_id, type, referenced_id)
    SELECT id, 'quoted', in_reply_to_post_id FROM posts WHERE id % 7 = 0
    AND in_reply_to_post_id IS NOT NULL`.execute(env.db)
  await sql`INSERT INTO conversations (id, root_post_id, post_count, reply_count,
      first_created_at, last_created_at)
    SELECT conversation_id, conversation_id, count(*), count(*) - 1, min(created_at), max(created_at)
    FROM posts GROUP BY conversation_id`.execute(env.db)
}

/** Stores small recent conversations as the writer does until `stop` resolves; returns their ids. */
async function keepWriting(stop: Promise<void>): Promise<string[]> {
  let stopped = false
  void stop.then(() => (stopped = true))
  const ids: string[] = []
  for (let c = 0; !stopped; c++) {
    const base = Date.now() - 3_600_000 + c * 1_000
    const lines = Array.from({ length: 20 }, (_, i) => {
      const id = snowflakeAt(new Date(base + i))
      ids.push(id)
      const root = snowflakeAt(new Date(base))
      return JSON.stringify({
        data: {
          id,
          text: `live ${c} ${i}`,
          author_id: '42',
          conversation_id: root,
          created_at: new Date(base + i).toISOString(),
          ...(i > 0 ? { referenced_tweets: [{ type: 'replied_to', id: root }] } : {}),
        },
        includes: { users: [{ id: '42', name: 'Live', username: 'live' }] },
      })
    })
    const { normalizeLines } = await import('@threadline/domain')
    await storeBatch(env.db, normalizeLines(lines, new Date().toISOString()), 'test')
  }
  return ids
}

describe('converting an existing store', () => {
  it('partitions 100 k stored Posts online, resumably, while the writer keeps writing', async () => {
    // A store from before partitioning, on which the later migrations ran (mentions' triggers).
    await archiveReads.down(env.db)
    await unpartition(env.db)
    await archiveReads.up(env.db)
    expect(await isPartitioned(env.db, 'posts')).toBe(false)
    await seed()
    const before = (
      await sql<{ n: string; s: string; refs: string }>`
        SELECT count(*)::text AS n, sum(id)::text AS s,
          (SELECT count(*) FROM post_references)::text AS refs FROM posts`.execute(env.db)
    ).rows[0]!

    let finish!: () => void
    const writing = keepWriting(new Promise<void>((r) => (finish = r)))
    // A conversion stopped after a few batches, then run again: it resumes from its cursor.
    const seen: ConversionProgress[] = []
    let batches = 0
    const stopped = await convertToPartitioned(env.db, {
      batchSize: 10_000,
      onProgress: (p) => {
        seen.push(p)
        if (++batches === 3) throw new Error('stopped by the test')
      },
    }).catch((err: Error) => err.message)
    expect(stopped).toBe('stopped by the test')
    expect(
      await convertToPartitioned(env.db, { batchSize: 10_000, onProgress: (p) => seen.push(p) }),
    ).toBe(true)
    finish()
    const live = await writing

    expect(await isPartitioned(env.db, 'posts')).toBe(true)
    expect(live.length).toBeGreaterThan(0)
    const posts = seen.filter((p) => p.table === 'posts')
    // The resumed run started from the cursor of the second batch, not from the start.
    expect(posts[3]!.copied).toBe(posts[1]!.copied + 10_000)
    const after = (
      await sql<{ n: string; s: string; refs: string }>`
        SELECT count(*)::text AS n, sum(id)::text AS s,
          (SELECT count(*) FROM post_references)::text AS refs
        FROM posts WHERE text LIKE 'seeded %'`.execute(env.db)
    ).rows[0]!
    expect(after).toEqual(before)
    const { rows: missing } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM unnest(${live}::bigint[]) AS l(id)
      WHERE NOT EXISTS (SELECT 1 FROM posts p WHERE p.id = l.id)`.execute(env.db)
    expect(missing[0]!.n).toBe(0)
    const { rows: off } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM conversations c
      WHERE post_count <> (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id)`.execute(
      env.db,
    )
    expect(off[0]!.n).toBe(0)
    const { rows: names } = await sql<{ name: string }>`
      SELECT indexname AS name FROM pg_indexes
      WHERE schemaname = current_schema() AND tablename = 'posts' ORDER BY 1`.execute(env.db)
    expect(names.map((r) => r.name)).toContain('posts_pkey')
    expect(names.map((r) => r.name).filter((n) => n.endsWith('_next'))).toEqual([])
    // The triggers later migrations put on posts (mentions) are on the partitioned table.
    const { rows: triggers } = await sql<{ name: string }>`
      SELECT tgname AS name FROM pg_trigger
      WHERE tgrelid = to_regclass('posts') AND NOT tgisinternal ORDER BY 1`.execute(env.db)
    expect(triggers.map((t) => t.name)).toEqual(['posts_mentions_insert', 'posts_mentions_update'])
  })
})
