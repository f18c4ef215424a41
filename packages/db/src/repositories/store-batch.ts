import { sql } from 'kysely'
import type { NormalizedBatch, PostRow, UserRow } from '@threadline/domain'
import { PREPARE, type Db } from '../connect.js'
import type { OutboxPayload } from '../tables/index.js'

/** How often a copy seen only in includes may refresh a stored Post or user. */
const INCLUDED_REFRESH = '60 seconds'

export interface StoreResult {
  /** Posts stored for the first time. */
  inserted: number
  /** Posts already stored, replaced by a newer copy. */
  updated: number
  users: number
  rejects: number
  /**
   * The outbox row this statement wrote (none when it stored nothing new), so the writer can
   * publish it from memory right after commit and delete it; the relay covers a crash in between.
   */
  outbox: Array<{ id: string; payload: OutboxPayload }>
}

/**
 * The UTF-8 bytes of each wire object's JSON (a Post's or a user's `raw`), made once per object for
 * one batch: the statement's parameters and the writer's `stored` stream entries are built from the
 * same bytes. They live outside the JavaScript heap, so a batch waiting on Postgres keeps its Posts
 * there instead of as strings and objects the garbage collector must copy while they wait.
 *
 * A row's `raw_json` (the object's text as it arrived, a view of its line) is used as it is; only
 * the rest are serialized again (with it, ≈ 3 µs a stream line to find the objects in the line's
 * bytes against ≈ 11 to serialize them).
 */
export class WireBytes {
  private readonly bytes = new Map<object, Buffer>()

  of(row: { raw: object; raw_json?: Uint8Array | undefined }): Buffer {
    let b = this.bytes.get(row.raw)
    if (b === undefined) {
      const json = row.raw_json
      b =
        json === undefined
          ? Buffer.from(JSON.stringify(row.raw), 'utf8')
          : Buffer.from(json.buffer, json.byteOffset, json.byteLength)
      this.bytes.set(row.raw, b)
    }
    return b
  }
}

/**
 * The Posts as the statement reads them: each row's `raw`, and beside it only what `raw` does not
 * hold. The statement reads every other column out of `raw` (id, ids, text, lang, metrics,
 * references), where normalizeLines validated it: sending them again beside `raw` doubled the text
 * Postgres parsed for a Post (its `text` twice, twenty keys to sort).
 *
 * `raw` goes as a text[] (see textArray), one element a row, each cast to jsonb alone; `terms` as
 * a text[] too, each element the row's search terms as an array literal (arrayLiteral), cast to
 * text[] by the statement; the rest as one small jsonb array, row by row in the same order. Keys:
 * `c` created_at
 * (normalized, or from the id when `raw` has none), `p` in_reply_to_post_id (omitted when null),
 * `q` the quotes and retweets of referenced_tweets (omitted when none: most Posts are replies or
 * stand alone, and the statement then reads no references at all for them), `o` observed_at,
 * `i` included. Inside that one jsonb array, `raw` cost Postgres more to parse
 * than its own element does (measured on a stored batch: the statement ≈ 85 → 74 µs a row); and
 * the search terms, as jsonb arrays read into text[] columns, cost it ≈ 8–12 µs a row where their
 * array literals cost ≈ 2–5 (500 rows of 22 terms, one connection).
 */
export function postsParams(
  rows: readonly PostRow[],
  bytes = new WireBytes(),
): { raw: Buffer; terms: Buffer; rest: Buffer } {
  return {
    raw: textArray(rows.map((p) => bytes.of(p))),
    terms: textArray(rows.map((p) => arrayLiteral(p.search_terms))),
    rest: jsonbArray(rows, (p) => {
      const parent = p.in_reply_to_post_id === null ? '' : `"p":"${p.in_reply_to_post_id}",`
      const others = p.refs.filter((r) => r.type !== 'replied_to')
      const refs = others.length === 0 ? '' : `"q":${JSON.stringify(others)},`
      return (
        `{"c":"${p.created_at}",` +
        `${parent}${refs}"o":${JSON.stringify(p.observed_at)},"i":${p.included}}`
      )
    }),
  }
}

/** Users as the statement reads them: raw (id, name and username are read out of it), observed_at. */
export function usersParams(
  rows: readonly UserRow[],
  bytes = new WireBytes(),
): { raw: Buffer; observed: Buffer } {
  return {
    raw: textArray(rows.map((u) => bytes.of(u))),
    observed: textArray(rows.map((u) => u.observed_at)),
  }
}

/**
 * A text[] literal, as Postgres's array input reads it: each element quoted (so that braces,
 * commas, spaces and the word NULL stay text), its quotes and backslashes escaped. Made from the
 * array's JSON, which is the same text between its brackets unless JSON escaped something (a
 * quote, a backslash, a control character): JSON.stringify is native, where a loop over the terms
 * cost the writer more than the literal saved Postgres.
 */
export function arrayLiteral(items: readonly string[]): string {
  const json = JSON.stringify(items)
  if (!json.includes('\\')) return `{${json.slice(1, -1)}}`
  return `{${items.map((t) => `"${t.replace(/["\\]/g, '\\$&')}"`).join(',')}}`
}

const TEXT_OID = 25

/**
 * A one-dimensional `text[]` in Postgres's binary array form: a header, then each element as its
 * length and its UTF-8 bytes. node-pg sends a Buffer as it is, in binary format: nothing is escaped
 * or quoted, and Postgres copies each element out as it reads it. Sized first, written once.
 */
export function textArray(items: readonly (Buffer | string)[]): Buffer {
  let size = 20
  for (const item of items) {
    size += 4 + (typeof item === 'string' ? Buffer.byteLength(item, 'utf8') : item.length)
  }
  const out = Buffer.allocUnsafe(size)
  out.writeInt32BE(1, 0) // dimensions
  out.writeInt32BE(0, 4) // no NULLs
  out.writeUInt32BE(TEXT_OID, 8)
  out.writeInt32BE(items.length, 12)
  out.writeInt32BE(1, 16) // lower bound
  let at = 20
  for (const item of items) {
    const length =
      typeof item === 'string' ? out.write(item, at + 4, 'utf8') : item.copy(out, at + 4)
    out.writeInt32BE(length, at)
    at += 4 + length
  }
  return out
}

/** jsonb's binary input format: a version byte, then the JSON text. */
const JSONB_VERSION = 1
const OPEN = Buffer.from([JSONB_VERSION, 0x5b]) // version, [
const COMMA = Buffer.from(',')
const CLOSE = Buffer.from(']')

/**
 * A JSON array as a jsonb parameter in binary form, built from each item's bytes. node-pg sends a
 * Buffer as it is, where it measures and encodes a string whole; and one non-ASCII item makes a
 * joined string two-byte throughout, so every ASCII item beside it took that slower path too.
 */
export function jsonbArray<T>(items: readonly T[], json: (item: T) => string): Buffer {
  const parts: Buffer[] = [OPEN]
  for (let i = 0; i < items.length; i++) {
    if (i > 0) parts.push(COMMA)
    parts.push(Buffer.from(json(items[i]!), 'utf8'))
  }
  parts.push(CLOSE)
  return Buffer.concat(parts)
}

/** A batch's statement parameters, made ahead of the statement (see prepareBatch). */
export interface PreparedBatch {
  posts: ReturnType<typeof postsParams>
  users: ReturnType<typeof usersParams>
  rejects: string
  rejectCount: number
  /** Nothing to store: no Posts, users or rejects. */
  empty: boolean
}

/**
 * The parameters of storeBatch's statement for `batch`. Made apart so that a caller can let go of
 * the batch's objects before it waits on Postgres (the parameters and `bytes` are all it needs).
 */
export function prepareBatch(batch: NormalizedBatch, bytes = new WireBytes()): PreparedBatch {
  return {
    posts: postsParams(batch.posts, bytes),
    users: usersParams(batch.users, bytes),
    rejects: JSON.stringify(batch.rejects),
    rejectCount: batch.rejects.length,
    empty: batch.posts.length === 0 && batch.users.length === 0 && batch.rejects.length === 0,
  }
}

/**
 * Stores a normalized batch in one statement (hence one transaction): users, Posts, references,
 * conversation counters, rejects and the outbox row. Each input set travels as a few array
 * parameters (postsParams, usersParams), so the cost is one round trip whatever the batch size.
 *
 * Idempotent and order-free:
 * - a Post is inserted once (ON CONFLICT); only a copy observed later replaces its columns;
 * - conversation counters grow only by the Posts this statement newly inserted (xmax = 0 marks an
 *   inserted row in RETURNING), so a redelivered batch changes nothing;
 * - root, first and last times are coalesce/least/greatest, so arrival order does not matter.
 * Rows are fed in id order so concurrent batches lock shared rows in the same order.
 *
 * Its text never changes (every input is a parameter), so it runs as a named prepared statement:
 * a writer parses and plans it once per connection, not once per batch.
 */
export async function storeBatch(
  db: Db,
  batch: NormalizedBatch,
  source: string,
): Promise<StoreResult> {
  return storePrepared(db, prepareBatch(batch), source)
}

/** storeBatch with its parameters made already (prepareBatch). */
export async function storePrepared(
  db: Db,
  prepared: PreparedBatch,
  source: string,
): Promise<StoreResult> {
  if (prepared.empty) return { inserted: 0, updated: 0, users: 0, rejects: 0, outbox: [] }
  const { posts, users, rejects } = prepared
  const { rows } = await sql<{
    outbox_id: string | null
    outbox_payload: OutboxPayload | null
    inserted: string
    updated: string
    users: string
    rejects: string
  }>`${PREPARE}
    WITH
    -- Row i of each parameter is row i of the batch. Materialized: each raw is cast once here, where
    -- inlined every r->>… below would parse it again.
    p_rows AS MATERIALIZED (
      SELECT r::jsonb AS r, t::text[] AS t, c, p, q, o, i
      FROM ROWS FROM (unnest(${posts.raw}::text[]), unnest(${posts.terms}::text[]),
        jsonb_to_recordset(${posts.rest}::jsonb)
          AS (c timestamptz, p bigint, q jsonb, o timestamptz, i boolean))
        AS x(r, t, c, p, q, o, i)
    ),
    u_rows AS MATERIALIZED (
      SELECT r::jsonb AS r, o::timestamptz AS o
      FROM unnest(${users.raw}::text[], ${users.observed}::text[]) AS x(r, o)
    ),
    p_in AS (
      SELECT (r->>'id')::bigint AS id, (r->>'conversation_id')::bigint AS conversation_id,
        (r->>'author_id')::bigint AS author_id,
        (r->>'in_reply_to_user_id')::bigint AS in_reply_to_user_id, p AS in_reply_to_post_id,
        r->>'text' AS text, c AS created_at, r->>'lang' AS lang,
        -- Validated as integers; via numeric, since JSON may write one as 25.0.
        (r->'public_metrics'->>'retweet_count')::numeric::integer AS retweet_count,
        (r->'public_metrics'->>'reply_count')::numeric::integer AS reply_count,
        (r->'public_metrics'->>'like_count')::numeric::integer AS like_count,
        (r->'public_metrics'->>'quote_count')::numeric::integer AS quote_count,
        (r->'public_metrics'->>'bookmark_count')::numeric::integer AS bookmark_count,
        (r->'public_metrics'->>'impression_count')::numeric::bigint AS impression_count,
        t AS search_terms, r AS raw, o AS observed_at, i AS included
      FROM p_rows
    ),
    -- A copy seen only in includes.tweets (a reply carries its parent, a quote the quoted Post) is
    -- a metrics refresh: it replaces a stored row at most once per INCLUDED_REFRESH, or a viral
    -- root would be rewritten (tuple, indexes, GIN) by every reply and its row lock serialise the
    -- writers. Primary copies always apply.
    p_eff AS (
      SELECT i.* FROM p_in i
      WHERE NOT i.included OR NOT EXISTS (
        SELECT 1 FROM posts s
        WHERE s.id = i.id AND s.observed_at >= i.observed_at - ${INCLUDED_REFRESH}::interval)
    ),
    u_in AS (
      SELECT (r->>'id')::bigint AS id, r->>'name' AS name, r->>'username' AS username,
        r AS raw, o AS observed_at
      FROM u_rows
    ),
    u_old AS (
      SELECT u.id, u.name, u.username, u.observed_at FROM users u
      WHERE u.id IN (SELECT id FROM u_in)
    ),
    -- Only the users the upsert below would change. ON CONFLICT DO UPDATE locks a conflicting row
    -- before it reads its WHERE, so a stored user it left alone still got a row lock (a tuple
    -- write, a WAL record), and a concurrent batch carrying the same user waited for this one to
    -- commit. Read on this statement's snapshot: a user that another batch changes meanwhile ends
    -- as it would have had that batch committed after this one, and its next copy applies.
    u_eff AS (
      SELECT n.* FROM u_in n LEFT JOIN u_old o ON o.id = n.id
      WHERE o.id IS NULL OR (o.observed_at < n.observed_at AND (
        o.name <> n.name OR o.username <> n.username
        OR o.observed_at < n.observed_at - ${INCLUDED_REFRESH}::interval))
    ),
    u_up AS (
      INSERT INTO users AS u (id, name, username, raw, observed_at)
      SELECT id, name, username, raw, observed_at FROM u_eff ORDER BY id
      ON CONFLICT (id) DO UPDATE SET
        name = excluded.name, username = excluded.username, raw = excluded.raw,
        observed_at = excluded.observed_at, updated_at = now()
      -- Users come in every line's includes: refresh a stored one at most once per
      -- INCLUDED_REFRESH, except that a new name or username applies at once (profile events).
      WHERE u.observed_at < excluded.observed_at AND (
        u.name <> excluded.name OR u.username <> excluded.username
        OR u.observed_at < excluded.observed_at - ${INCLUDED_REFRESH}::interval)
      RETURNING u.id, u.name, u.username, (xmax = 0) AS inserted
    ),
    p_up AS (
      INSERT INTO posts AS p (
        id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
        created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
        impression_count, search_terms, raw, observed_at)
      SELECT id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
        created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
        impression_count, coalesce(search_terms, '{}'), raw, observed_at
      FROM p_eff ORDER BY id
      ON CONFLICT (id) DO UPDATE SET
        conversation_id = coalesce(excluded.conversation_id, p.conversation_id),
        author_id = coalesce(excluded.author_id, p.author_id),
        text = excluded.text, lang = excluded.lang,
        retweet_count = excluded.retweet_count, reply_count = excluded.reply_count,
        like_count = excluded.like_count, quote_count = excluded.quote_count,
        bookmark_count = excluded.bookmark_count, impression_count = excluded.impression_count,
        search_terms = excluded.search_terms, raw = excluded.raw,
        observed_at = excluded.observed_at, updated_at = now()
      WHERE p.observed_at < excluded.observed_at
      RETURNING p.id, p.conversation_id, p.in_reply_to_post_id, p.created_at, (xmax = 0) AS inserted
    ),
    new_posts AS (SELECT * FROM p_up WHERE inserted),
    -- Quotes and retweets only (postsParams' q, from the references normalizeLines validated): a
    -- reply's parent is posts.in_reply_to_post_id (indexed), and nothing reads replied_to rows
    -- here, which were most of the table's rows and index entries. Read from p_rows, so that p_in
    -- has one reader and is not materialized.
    refs AS (
      INSERT INTO post_references (post_id, type, referenced_id)
      SELECT (x.r->>'id')::bigint, q.type, q.id::bigint
      FROM p_rows x CROSS JOIN LATERAL jsonb_to_recordset(x.q) AS q(type text, id text)
      ORDER BY 1, 2, 3
      ON CONFLICT DO NOTHING
    ),
    conv AS (
      INSERT INTO conversations AS c (
        id, root_post_id, post_count, reply_count, first_created_at, last_created_at)
      SELECT conversation_id,
        max(id) FILTER (WHERE id = conversation_id),
        count(*),
        count(*) FILTER (WHERE in_reply_to_post_id IS NOT NULL),
        min(created_at), max(created_at)
      FROM new_posts WHERE conversation_id IS NOT NULL
      GROUP BY conversation_id ORDER BY conversation_id
      ON CONFLICT (id) DO UPDATE SET
        root_post_id = coalesce(c.root_post_id, excluded.root_post_id),
        post_count = c.post_count + excluded.post_count,
        reply_count = c.reply_count + excluded.reply_count,
        first_created_at = least(c.first_created_at, excluded.first_created_at),
        last_created_at = greatest(c.last_created_at, excluded.last_created_at),
        updated_at = now()
    ),
    rej AS (
      INSERT INTO ingest_rejects (source, reason, raw)
      SELECT ${source}, reason, raw FROM jsonb_to_recordset(${rejects}::jsonb) AS x(reason text, raw text)
    ),
    user_changes AS (
      SELECT n.id, o.name AS old_name, o.username AS old_username, n.name, n.username
      FROM u_up n JOIN u_old o ON o.id = n.id
      WHERE NOT n.inserted AND (n.name <> o.name OR n.username <> o.username)
    ),
    ob AS (
      INSERT INTO outbox (payload)
      SELECT jsonb_build_object(
        'post_ids', coalesce((SELECT jsonb_agg(id::text ORDER BY id) FROM new_posts), '[]'::jsonb),
        'user_changes', coalesce((SELECT jsonb_agg(jsonb_build_object(
            'id', id::text,
            'before', jsonb_build_object('name', old_name, 'username', old_username),
            'after', jsonb_build_object('name', name, 'username', username)) ORDER BY id)
          FROM user_changes), '[]'::jsonb))
      WHERE EXISTS (SELECT 1 FROM new_posts) OR EXISTS (SELECT 1 FROM user_changes)
      RETURNING id, payload
    )
    SELECT
      (SELECT id::text FROM ob) AS outbox_id,
      (SELECT payload FROM ob) AS outbox_payload,
      (SELECT count(*) FROM new_posts) AS inserted,
      (SELECT count(*) FROM p_up WHERE NOT inserted) AS updated,
      (SELECT count(*) FROM u_up) AS users,
      ${prepared.rejectCount}::int AS rejects
  `.execute(db)
  const row = rows[0]!
  return {
    inserted: Number(row.inserted),
    updated: Number(row.updated),
    users: Number(row.users),
    rejects: Number(row.rejects),
    outbox:
      row.outbox_id && row.outbox_payload
        ? [{ id: row.outbox_id, payload: row.outbox_payload }]
        : [],
  }
}
