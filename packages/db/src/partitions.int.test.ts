import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { snowflakeAt } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { sql } from 'kysely'
import { isDataError } from './connect.js'
import { searchQuery } from './repositories/read-posts.js'
import {
  createPartition,
  createPartitionsAhead,
  dailyRanges,
  DAYS_AHEAD,
  expirePartitions,
  isMissingPartition,
  isPartitioned,
  listPartitions,
  PARTITIONED_TABLES,
  type PartitionedTable,
} from './partitions.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const DAY = 86_400_000
const day = (offset: number, from = Date.now()) =>
  new Date(Math.floor(from / DAY) * DAY + offset * DAY)
const tables = Object.keys(PARTITIONED_TABLES) as PartitionedTable[]

async function insertPost(id: string) {
  await sql`INSERT INTO posts (id, conversation_id, text, created_at, raw, observed_at)
    VALUES (${id}, ${id}, 'x', now(), '{}', now())`.execute(env.db)
}

describe('partitions', () => {
  it('a new store is partitioned by id, contiguously, from MINVALUE to DAYS_AHEAD days ahead', async () => {
    for (const table of tables) {
      expect(await isPartitioned(env.db, table)).toBe(true)
      const parts = await listPartitions(env.db, table)
      expect(parts[0]).toEqual({ name: `${table}_legacy`, from: undefined, to: '29700859247' })
      for (let i = 1; i < parts.length; i++) expect(parts[i]!.from).toBe(parts[i - 1]!.to)
      expect(parts.at(-1)!.to).toBe(snowflakeAt(day(DAYS_AHEAD + 1)))
      expect(parts.map((p) => p.name)).toContain(
        `${table}_p${day(0).toISOString().slice(0, 10).replaceAll('-', '')}`,
      )
    }
    // Index names survive the rebuild (later migrations drop indexes by name).
    const { rows } = await sql<{ name: string }>`
      SELECT indexname AS name FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'posts'`.execute(
      env.db,
    )
    expect(rows.map((r) => r.name)).toEqual(
      expect.arrayContaining([
        'posts_pkey',
        'posts_conversation_tree_idx',
        'posts_search_terms_idx',
      ]),
    )
  })

  it('a row past the newest partition is a transient error until the days ahead exist', async () => {
    const later = day(30)
    const id = snowflakeAt(new Date(later.getTime() + 3_600_000))
    const error = await insertPost(id).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(isMissingPartition(error)).toBe(true)
    expect(isDataError(error)).toBe(false)
    // A CHECK constraint (same SQLSTATE 23514) stays bad data.
    const check = await sql`INSERT INTO post_references VALUES (1, 'liked', 2)`
      .execute(env.db)
      .then(
        () => undefined,
        (err: unknown) => err,
      )
    expect(isDataError(check)).toBe(true)

    const created = await createPartitionsAhead(env.db, later)
    // The gap up to the day before `later` in one partition, then a partition a day.
    expect(created.filter((n) => n.startsWith('posts_'))).toHaveLength(1 + DAYS_AHEAD + 2)
    await insertPost(id)
    expect(await createPartitionsAhead(env.db, later)).toEqual([])
  })

  it('expiry detaches and drops whole partitions older than the retention, and nothing newer', async () => {
    const old = snowflakeAt(day(-400))
    const recent = snowflakeAt(day(-2))
    await insertPost(old)
    await insertPost(recent)
    const before = await listPartitions(env.db, 'posts')
    const dropped = await expirePartitions(env.db, new Date(), 30)
    const after = await listPartitions(env.db, 'posts')
    expect(dropped).toContain('posts_legacy')
    expect(after.length).toBe(before.length - dropped.filter((n) => n.startsWith('posts_')).length)
    // Every partition left holds ids younger than the horizon; the old Post went with its partition.
    expect(BigInt(after[0]!.to)).toBeGreaterThan(BigInt(snowflakeAt(day(-30))))
    const { rows } = await sql<{ id: string }>`SELECT id FROM posts ORDER BY id`.execute(env.db)
    expect(rows.map((r) => r.id)).toContain(recent)
    expect(rows.map((r) => r.id)).not.toContain(old)
    const { rows: leftovers } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM pg_class WHERE relname = 'posts_legacy'
      AND relnamespace = current_schema()::regnamespace`.execute(env.db)
    expect(leftovers[0]!.n).toBe(0)
  })
})

describe('reads that prune', () => {
  it('a recent search with a time window reads only the partitions of its days', async () => {
    // Daily partitions for the last 30 days instead of the coarse range that holds them.
    const coarse = (await listPartitions(env.db, 'posts')).find(
      (p) => p.to === snowflakeAt(day(-1)) && p.from !== undefined,
    )!
    await sql`DROP TABLE ${sql.table(coarse.name)}`.execute(env.db)
    await createPartition(env.db, 'posts', { ...coarse, to: snowflakeAt(day(-30)) })
    for (const range of dailyRanges('posts', day(-30), day(-1))) {
      await createPartition(env.db, 'posts', range)
    }
    const now = new Date()
    const start = new Date(now.getTime() - 7 * DAY)
    const query = searchQuery(env.db, (eb) => eb('posts.search_terms', '@>', eb.val(['hello'])), {
      startTime: start,
      endTime: now,
      limit: 100,
    })
      .select('id')
      .compile()
    const { rows } = await env.db.executeQuery<{ 'QUERY PLAN': unknown }>({
      ...query,
      sql: `EXPLAIN (FORMAT JSON) ${query.sql}`,
    })
    const touched = [
      ...JSON.stringify(rows[0]!['QUERY PLAN']).matchAll(/"Relation Name":"([^"]+)"/g),
    ]
      .map((m) => m[1]!)
      .sort()
    const days = dailyRanges('posts', day(-7), day(1)).map((r) => r.name)
    expect(touched.length).toBeGreaterThan(0)
    expect(touched.every((name) => days.includes(name))).toBe(true)
  })
})
