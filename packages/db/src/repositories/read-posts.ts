import {
  sql,
  type CompiledQuery,
  type Expression,
  type ExpressionBuilder,
  type RawBuilder,
  type SelectExpression,
  type SqlBool,
} from 'kysely'
import { snowflakeAt, type Withdrawal, type WirePost, type WireUser } from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'
import { FIRST_SNOWFLAKE_ID } from '../partitions.js'
import type { Database } from '../tables/index.js'

/** A search condition over `posts`, as @threadline/query's compileSql returns. */
export type PostCondition = (eb: ExpressionBuilder<Database, 'posts'>) => Expression<SqlBool>

/**
 * `raw` as served (SQL over posts, its columns qualified by `p`, e.g. `p.`): with X's `withheld`
 * field when the Post is withheld in some countries (docs/api.md §7).
 */
export const servedRaw = (p = '') => `CASE WHEN ${p}withheld_in_countries IS NULL THEN ${p}raw
  ELSE ${p}raw || jsonb_build_object('withheld', jsonb_build_object(
    'copyright', false, 'country_codes', to_jsonb(${p}withheld_in_countries))) END`

/**
 * What the read pipeline's rules see of a withdrawal (SQL select items): `deleted`, or
 * `unavailable` for a hidden Post (the tree's words), and X's reason, which decides a lookup's error.
 */
export const withdrawalColumns = (p = '') => `CASE ${p}withdrawn WHEN 'deleted' THEN 'deleted'
  WHEN 'hidden' THEN 'unavailable' END AS withdrawn, ${p}withdrawn_reason AS withdrawn_reason`

/** The columns the read API shapes Posts from; `raw` carries every field without a column. */
const POST_COLUMNS = [
  'id',
  'text',
  'created_at',
  'conversation_id',
  'author_id',
  'in_reply_to_user_id',
  sql<WirePost>`${sql.raw(servedRaw())}`.as('raw'),
  sql<Withdrawal | null>`CASE withdrawn WHEN 'deleted' THEN 'deleted'
    WHEN 'hidden' THEN 'unavailable' END`.as('withdrawn'),
  'withdrawn_reason',
] as const

export type ReadPost = {
  id: string
  text: string
  created_at: Date
  conversation_id: string | null
  author_id: string | null
  in_reply_to_user_id: string | null
  raw: WirePost
  withdrawn: Withdrawal | null
  withdrawn_reason: string | null
}

/**
 * A user's `raw` as served (SQL over users): with X's `withheld` field when the user is withheld
 * in some countries (docs/api.md §7).
 */
export const servedUserRaw = `CASE WHEN withheld_in_countries IS NULL THEN raw
  ELSE raw || jsonb_build_object('withheld', jsonb_build_object(
    'country_codes', to_jsonb(withheld_in_countries), 'scope', 'user')) END`

export type ReadUser = {
  id: string
  name: string
  username: string
  raw: WireUser
}

/**
 * The Posts of `ids` with `columns`, each id read by a probe of its own partition: a LATERAL join
 * prunes partitions per id at run time, where `id = ANY($1)` alone probes every partition's index;
 * `id = ANY($1)` inside it lets the planner keep only the ids' partitions, as a plan of every
 * partition costs more than the probes. Targets: a lookup's p99 grows < 1.5× from 1 M to 10 M
 * Posts, partitioned (`bench growth`), and `bench api` within 10 % of the unpartitioned store's.
 */
function postsOfIds<C extends SelectExpression<Database, 'posts'>>(
  db: Db,
  ids: RawBuilder<unknown>,
  columns: readonly C[],
) {
  return db
    .selectFrom(sql<{ id: string }>`(SELECT DISTINCT unnest(${ids}::bigint[]) AS id)`.as('wanted'))
    .innerJoinLateral(
      (eb) =>
        eb
          .selectFrom('posts')
          .select(columns)
          .whereRef('posts.id', '=', 'wanted.id')
          .where('posts.id', '=', sql<string>`any(${ids}::bigint[])`)
          .as('p'),
      (join) => join.onTrue(),
    )
    .selectAll('p')
}

/** Posts by id, in one statement; ids not stored are simply absent. */
export async function postsByIds(db: Db, ids: readonly string[]): Promise<ReadPost[]> {
  if (ids.length === 0) return []
  return (await postsOfIds(db, sql.val(ids), POST_COLUMNS).execute()) as ReadPost[]
}

/** Users by id, in one statement; a user X withdrew is never read (docs/api.md §7). */
export async function usersByIds(db: Db, ids: readonly string[]): Promise<ReadUser[]> {
  if (ids.length === 0) return []
  return db
    .selectFrom('users')
    .select(['id', 'name', 'username', sql<WireUser>`${sql.raw(servedUserRaw)}`.as('raw')])
    .where('id', '=', sql<string>`any(${sql.val(ids)}::bigint[])`)
    .where('withdrawn', 'is', null)
    .execute()
}

/** Users by username, case-insensitively (the `lower(username)` index), in one statement. */
export async function usersByUsernames(db: Db, usernames: readonly string[]): Promise<ReadUser[]> {
  if (usernames.length === 0) return []
  const lowered = usernames.map((u) => u.toLowerCase())
  return db
    .selectFrom('users')
    .select(['id', 'name', 'username', sql<WireUser>`${sql.raw(servedUserRaw)}`.as('raw')])
    .where(sql<string>`lower(username)`, '=', sql<string>`any(${sql.val(lowered)}::text[])`)
    .where('withdrawn', 'is', null)
    .execute()
}

/**
 * A Post already in its wire form, as JSON text: `id`, `text` and the requested fields, in the
 * order asked. Built from columns and pieces of `raw` that Postgres renders as text, so a page of
 * Posts is never parsed into objects and serialized again: the read pipeline's hydration when
 * nothing is expanded (@threadline/api `pipeline/hydrate.ts`). Equivalent to
 * `JSON.stringify(shapePost(post, fields))` in @threadline/domain once parsed; a test holds the two
 * together.
 */
export interface WirePostText {
  id: string
  json: string
  /** Set when X withdrew it: the rules serve a placeholder or an error instead of `json`. */
  withdrawn?: Withdrawal
  withdrawn_reason?: string
}

const TIME_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'

/** One requested field of a Post as JSON text, or NULL when the Post does not have it. */
function wireField(field: string): RawBuilder<string | null> {
  if (!/^[a-z_]{1,64}$/.test(field)) throw new Error(`not a Post field: ${field}`)
  const key = sql.lit(field)
  switch (field) {
    case 'created_at':
      return sql`'"' || to_char(created_at AT TIME ZONE 'UTC', ${sql.lit(TIME_FORMAT)}) || '"'`
    case 'conversation_id':
    case 'author_id':
    case 'in_reply_to_user_id':
      // The column wins; the upstream object speaks for Posts stored without it.
      return sql`coalesce('"' || ${sql.ref(field)} || '"', nullif((raw -> ${key})::text, 'null'))`
    case 'withheld':
      return sql`nullif((${sql.raw(servedRaw())} -> ${key})::text, 'null')`
    case 'edit_history_tweet_ids':
      return sql`CASE WHEN jsonb_typeof(raw -> ${key}) = 'array' AND jsonb_array_length(raw -> ${key}) > 0
        THEN (raw -> ${key})::text ELSE '["' || id || '"]' END`
    default:
      return sql`nullif((raw -> ${key})::text, 'null')`
  }
}

/** The select list for WirePostText: id, text, and one text column per field (`f0`, `f1`, …). */
export function wireColumns(fields: readonly string[]) {
  const wanted = fields.filter((f) => f !== 'id' && f !== 'text')
  return {
    wanted,
    columns: [
      sql<string>`id`.as('id'),
      sql<string>`text`.as('text'),
      sql<string | null>`CASE withdrawn WHEN 'deleted' THEN 'deleted'
        WHEN 'hidden' THEN 'unavailable' END`.as('withdrawn'),
      sql<string | null>`withdrawn_reason`.as('withdrawn_reason'),
      ...wanted.map((f, i) => wireField(f).as(`f${i}`)),
    ],
  }
}

export function wireJson(row: Record<string, unknown>, wanted: readonly string[]): WirePostText {
  const id = row.id as string
  let json = `{"id":"${id}","text":${JSON.stringify(row.text)}`
  for (let i = 0; i < wanted.length; i++) {
    const value = row[`f${i}`]
    if (typeof value === 'string') json += `,"${wanted[i]}":${value}`
  }
  const out: WirePostText = { id, json: json + '}' }
  if (typeof row.withdrawn === 'string') out.withdrawn = row.withdrawn as Withdrawal
  if (typeof row.withdrawn_reason === 'string') out.withdrawn_reason = row.withdrawn_reason
  return out
}

/**
 * The lookup statement for one field list, compiled once: it depends on nothing else (the ids
 * travel as its one parameter), and the builder and compiler cost more than the rest of a
 * one-Post lookup in this process. Bounded like the prepared statements it becomes.
 */
const lookupStatements = new Map<string, { sql: string; wanted: string[]; idParameters: number }>()

function lookupStatement(db: Db, fields: readonly string[]) {
  const key = fields.join(',')
  let statement = lookupStatements.get(key)
  if (!statement) {
    const { wanted, columns } = wireColumns(fields)
    const compiled = postsOfIds(db, sql.val([]), columns).compile()
    // The ids are each of its parameters (postsOfIds names them twice).
    statement = { sql: compiled.sql, wanted, idParameters: compiled.parameters.length }
    if (lookupStatements.size < 256) lookupStatements.set(key, statement)
  }
  return statement
}

/** Posts by id in wire form (see WirePostText), in one statement; ids not stored are absent. */
export async function wirePostsByIds(
  db: Db,
  ids: readonly string[],
  fields: readonly string[],
): Promise<WirePostText[]> {
  if (ids.length === 0) return []
  const statement = lookupStatement(db, fields)
  const parameters = Array.from({ length: statement.idParameters }, () => ids)
  const rows = await queryRows<Record<string, unknown>>(db, statement.sql, parameters, {
    prepare: true,
  })
  return rows.map((r) => wireJson(r, statement.wanted))
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
  /**
   * Run as a named prepared statement (see queryRows). Only for conditions whose best plan does not
   * depend on their values, such as one conversation id: a prepared statement may settle on one
   * generic plan, which for a keyword of very uneven frequency can be far from the best one.
   * Counts never are: their generic plan (time bounds unknown) scans by time, 50× slower here.
   */
  prepared?: boolean
}

/**
 * X's `created_at` is its id's time cut to the second, so a time window holds the ids from the
 * start's smallest snowflake to the end's plus a second; Posts from before snowflakes have ids
 * below any such upper bound. The id bounds let the planner prune partitions by time; the
 * `created_at` conditions stay exact.
 */
export function idBoundsOfTimes(
  startTime?: Date,
  endTime?: Date,
): { from?: string; below?: string } {
  const below = endTime && snowflakeAt(new Date(endTime.getTime() + 1_000))
  return {
    from: startTime && snowflakeAt(startTime),
    below: below && BigInt(below) > BigInt(FIRST_SNOWFLAKE_ID) ? below : undefined,
  }
}

function windowed<Q extends { where: (...args: any[]) => Q }>(query: Q, w: SearchWindow): Q {
  let q = query
  if (w.sinceId !== undefined) q = q.where('id', '>', w.sinceId)
  if (w.untilId !== undefined) q = q.where('id', '<', w.untilId)
  const ids = idBoundsOfTimes(w.startTime, w.endTime)
  if (ids.from !== undefined) q = q.where('id', '>=', ids.from)
  if (ids.below !== undefined) q = q.where('id', '<', ids.below)
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
  return page(
    await run(db, searchQuery(db, condition, window).select(POST_COLUMNS), window),
    window.limit,
  )
}

/** searchPosts, with the Posts in wire form (see WirePostText). */
export async function searchWirePosts(
  db: Db,
  condition: PostCondition,
  window: SearchWindow & { beforeId?: string; limit: number },
  fields: readonly string[],
): Promise<{ posts: WirePostText[]; more: boolean }> {
  const { wanted, columns } = wireColumns(fields)
  const rows = await run(db, searchQuery(db, condition, window).select(columns), window)
  const { posts, more } = page(rows, window.limit)
  return { posts: posts.map((r) => wireJson(r, wanted)), more }
}

export function searchQuery(
  db: Db,
  condition: PostCondition,
  window: SearchWindow & { beforeId?: string; limit: number },
) {
  // Withdrawn Posts are never found (docs/api.md §7).
  let query = windowed(
    db.selectFrom('posts').where(condition).where('withdrawn', 'is', null),
    window,
  )
  if (window.beforeId !== undefined) query = query.where('id', '<', window.beforeId)
  return query.orderBy('id', 'desc').limit(window.limit + 1)
}

/** Runs a search's query, by name when the window asks for it (see SearchWindow.prepared). */
async function run<R>(
  db: Db,
  query: { execute(): Promise<R[]>; compile(): CompiledQuery<R> },
  window: SearchWindow,
): Promise<R[]> {
  if (!window.prepared) return query.execute()
  const { sql: text, parameters } = query.compile()
  return queryRows<R>(db, text, parameters, { prepare: true })
}

/** Fetches one extra row to know whether another page exists. */
function page<T>(rows: T[], limit: number): { posts: T[]; more: boolean } {
  const more = rows.length > limit
  if (more) rows.length = limit
  return { posts: rows, more }
}

export type Granularity = 'minute' | 'hour' | 'day'

const STEP: Record<Granularity, string> = {
  minute: '1 minute',
  // Hours, not days: `interval '1 day'` follows the session's time zone across DST changes.
  hour: '1 hour',
  day: '24 hours',
}

/** One bucket of counts; its bounds are already in X's time format (`…T…:…:….000Z`). */
export interface CountBucket {
  start: string
  end: string
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
      .where(condition)
      .where('withdrawn', 'is', null),
    window,
  ).groupBy(sql`1`)
  const start = window.startTime.toISOString()
  const end = window.endTime.toISOString()
  const time = sql.lit(TIME_FORMAT)
  const { rows } = await sql<{ start: string; end: string; n: string }>`
    WITH counts AS (${counts}),
    buckets AS (
      SELECT g AS bucket
      FROM generate_series(
        date_trunc(${sql.lit(unit)}, ${start}::timestamptz, 'UTC'),
        ${end}::timestamptz - interval '1 microsecond',
        ${step}::interval) AS g
    )
    SELECT to_char(greatest(b.bucket, ${start}::timestamptz) AT TIME ZONE 'UTC', ${time}) AS start,
      to_char(least(b.bucket + ${step}::interval, ${end}::timestamptz) AT TIME ZONE 'UTC', ${time}) AS end,
      coalesce(c.n, 0) AS n
    FROM buckets b LEFT JOIN counts c ON c.bucket = b.bucket
    ORDER BY b.bucket
  `.execute(db)
  return rows.map((r) => ({ start: r.start, end: r.end, tweet_count: Number(r.n) }))
}
