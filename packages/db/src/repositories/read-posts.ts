import { sql, type Expression, type ExpressionBuilder, type SqlBool } from 'kysely'
import type { WirePost, WireUser } from '@threadline/domain'
import type { Db } from '../connect.js'
import type { Database } from '../tables/index.js'

/** A search condition over `posts`, as @threadline/query's compileSql returns. */
export type PostCondition = (eb: ExpressionBuilder<Database, 'posts'>) => Expression<SqlBool>

/** The columns the read API shapes Posts from; `raw` carries every field without a column. */
const POST_COLUMNS = [
  'id',
  'text',
  'created_at',
  'conversation_id',
  'author_id',
  'in_reply_to_user_id',
  'raw',
] as const

export type ReadPost = {
  id: string
  text: string
  created_at: Date
  conversation_id: string | null
  author_id: string | null
  in_reply_to_user_id: string | null
  raw: WirePost
}

export type ReadUser = {
  id: string
  name: string
  username: string
  raw: WireUser
}

/** Posts by id, in one statement; ids not stored are simply absent. */
export async function postsByIds(db: Db, ids: readonly string[]): Promise<ReadPost[]> {
  if (ids.length === 0) return []
  return db
    .selectFrom('posts')
    .select(POST_COLUMNS)
    .where('id', '=', sql<string>`any(${sql.val(ids)}::bigint[])`)
    .execute()
}

/** Users by id, in one statement. */
export async function usersByIds(db: Db, ids: readonly string[]): Promise<ReadUser[]> {
  if (ids.length === 0) return []
  return db
    .selectFrom('users')
    .select(['id', 'name', 'username', 'raw'])
    .where('id', '=', sql<string>`any(${sql.val(ids)}::bigint[])`)
    .execute()
}

/** Users by username, case-insensitively (the `lower(username)` index), in one statement. */
export async function usersByUsernames(db: Db, usernames: readonly string[]): Promise<ReadUser[]> {
  if (usernames.length === 0) return []
  const lowered = usernames.map((u) => u.toLowerCase())
  return db
    .selectFrom('users')
    .select(['id', 'name', 'username', 'raw'])
    .where(sql<string>`lower(username)`, '=', sql<string>`any(${sql.val(lowered)}::text[])`)
    .execute()
}

export interface SearchWindow {
  /** Exclusive lower id bound. */
  sinceId?: string
  /** Exclusive upper id bound. */
  untilId?: string
  /** Inclusive lower `created_at` bound. */
  startTime?: Date
  /** Exclusive upper `created_at` bound. */
  endTime?: Date
}

function windowed<Q extends { where: (...args: any[]) => Q }>(query: Q, w: SearchWindow): Q {
  let q = query
  if (w.sinceId !== undefined) q = q.where('id', '>', w.sinceId)
  if (w.untilId !== undefined) q = q.where('id', '<', w.untilId)
  if (w.startTime !== undefined) q = q.where('created_at', '>=', w.startTime)
  if (w.endTime !== undefined) q = q.where('created_at', '<', w.endTime)
  return q
}

/**
 * One page of a search, newest first by id (ids are time-ordered). Keyset pagination: `beforeId`
 * is the last id of the previous page; never OFFSET. Fetches one extra row to know whether
 * another page exists, so an empty page never carries a next token.
 */
export async function searchPosts(
  db: Db,
  condition: PostCondition,
  window: SearchWindow & { beforeId?: string; limit: number },
): Promise<{ posts: ReadPost[]; more: boolean }> {
  let query = windowed(db.selectFrom('posts').select(POST_COLUMNS).where(condition), window)
  if (window.beforeId !== undefined) query = query.where('id', '<', window.beforeId)
  const rows = await query
    .orderBy('id', 'desc')
    .limit(window.limit + 1)
    .execute()
  const more = rows.length > window.limit
  if (more) rows.length = window.limit
  return { posts: rows, more }
}

export type Granularity = 'minute' | 'hour' | 'day'

const STEP: Record<Granularity, string> = {
  minute: '1 minute',
  // Hours, not days: `interval '1 day'` follows the session's time zone across DST changes.
  hour: '1 hour',
  day: '24 hours',
}

export interface CountBucket {
  start: Date
  end: Date
  tweet_count: number
}

/**
 * Counts matching Posts per UTC-aligned bucket over [start, end), computed in SQL: a
 * generate_series of buckets left-joined to grouped counts, so empty buckets are rows too. The
 * first and last buckets are clipped to the window.
 */
export async function countPosts(
  db: Db,
  condition: PostCondition,
  window: SearchWindow & { startTime: Date; endTime: Date; granularity: Granularity },
): Promise<CountBucket[]> {
  if (window.endTime <= window.startTime) return []
  const unit = window.granularity
  const step = sql.lit(STEP[unit])
  const counts = windowed(
    db
      .selectFrom('posts')
      .select([
        sql<Date>`date_trunc(${sql.lit(unit)}, created_at, 'UTC')`.as('bucket'),
        (eb) => eb.fn.countAll<string>().as('n'),
      ])
      .where(condition),
    window,
  ).groupBy(sql`1`)
  const start = window.startTime.toISOString()
  const end = window.endTime.toISOString()
  const { rows } = await sql<{ start: Date; end: Date; n: string }>`
    WITH counts AS (${counts}),
    buckets AS (
      SELECT g AS bucket
      FROM generate_series(
        date_trunc(${sql.lit(unit)}, ${start}::timestamptz, 'UTC'),
        ${end}::timestamptz - interval '1 microsecond',
        ${step}::interval) AS g
    )
    SELECT greatest(b.bucket, ${start}::timestamptz) AS start,
      least(b.bucket + ${step}::interval, ${end}::timestamptz) AS end,
      coalesce(c.n, 0) AS n
    FROM buckets b LEFT JOIN counts c ON c.bucket = b.bucket
    ORDER BY b.bucket
  `.execute(db)
  return rows.map((r) => ({ start: r.start, end: r.end, tweet_count: Number(r.n) }))
}
