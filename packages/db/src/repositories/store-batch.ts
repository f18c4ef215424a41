import type { NormalizedBatch, PostRow, UserRow } from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'
import type { OutboxPayload } from '../tables/index.js'

export interface StoreResult {
  /** Posts stored for the first time. */
  inserted: number
  /** Posts already stored, replaced by a newer copy. */
  updated: number
  users: number
  rejects: number
  /**
   * The outbox row this statement wrote (none when it stored nothing new), so the writer can
   * publish it right after commit and delete it; the relay covers a crash in between.
   */
  outbox: Array<{ id: string; payload: OutboxPayload }>
}

/**
 * The Posts as the statement reads them: `raw`, a JSON array of the rows' objects, and `rest`, a
 * JSON array of what `raw` does not hold (element i of each is row i). The statement reads every
 * other column out of `raw`, where normalizeLines validated it. Keys of `rest`: `t` the search
 * terms, `c` created_at (normalized, or from the id when `raw` has none), `p` in_reply_to_post_id,
 * `q` the quotes and retweets of referenced_tweets (omitted when none), `o` observed_at, `i`
 * included.
 */
export function postsParams(rows: readonly PostRow[]): { raw: string; rest: string } {
  return {
    raw: JSON.stringify(rows.map((p) => p.raw)),
    rest: JSON.stringify(
      rows.map((p) => {
        const quotes = p.refs.filter((r) => r.type !== 'replied_to')
        return {
          t: p.search_terms,
          c: p.created_at,
          p: p.in_reply_to_post_id,
          ...(quotes.length > 0 ? { q: quotes } : {}),
          o: p.observed_at,
          i: p.included,
        }
      }),
    ),
  }
}

/** Users as the statement reads them: raw (id, name and username are read out of it), observed_at. */
export function usersParams(rows: readonly UserRow[]): { raw: string; observed: string[] } {
  return {
    raw: JSON.stringify(rows.map((u) => u.raw)),
    observed: rows.map((u) => u.observed_at),
  }
}

/** $1–$2 postsParams, $3–$4 usersParams, $5 the rejects (jsonb), $6 their source. */
const STORE_BATCH = `
  WITH
  -- Element i of $1 is row i of $2 (see postsParams). Materialized: p_in and refs both read it.
  p_rows AS MATERIALIZED (
    SELECT r, t, c, p, q, o, i
    FROM ROWS FROM (jsonb_array_elements($1::jsonb), jsonb_to_recordset($2::jsonb)
        AS (t text[], c timestamptz, p bigint, q jsonb, o timestamptz, i boolean))
      AS x(r, t, c, p, q, o, i)
  ),
  u_rows AS (
    SELECT r, o FROM ROWS FROM (jsonb_array_elements($3::jsonb), unnest($4::timestamptz[])) AS x(r, o)
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
  -- a metrics refresh: it replaces a stored row at most once a minute, or a viral
  -- root would be rewritten (tuple, indexes, GIN) by every reply and its row lock serialise the
  -- writers. Primary copies always apply.
  p_eff AS (
    SELECT i.* FROM p_in i
    WHERE NOT i.included OR NOT EXISTS (
      SELECT 1 FROM posts s
      WHERE s.id = i.id AND s.observed_at >= i.observed_at - interval '60 seconds')
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
      OR o.observed_at < n.observed_at - interval '60 seconds'))
  ),
  u_up AS (
    INSERT INTO users AS u (id, name, username, raw, observed_at)
    SELECT id, name, username, raw, observed_at FROM u_eff ORDER BY id
    ON CONFLICT (id) DO UPDATE SET
      name = excluded.name, username = excluded.username, raw = excluded.raw,
      observed_at = excluded.observed_at, updated_at = now()
    -- Users come in every line's includes: refresh a stored one at most once a
    -- minute, except that a new name or username applies at once (profile events).
    WHERE u.observed_at < excluded.observed_at AND (
      u.name <> excluded.name OR u.username <> excluded.username
      OR u.observed_at < excluded.observed_at - interval '60 seconds')
    RETURNING u.id, u.name, u.username, (xmax = 0) AS inserted
  ),
  p_up AS (
    INSERT INTO posts AS p (
      id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
      created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
      impression_count, search_terms, raw, observed_at, stored_xid)
    SELECT id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
      created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
      impression_count, coalesce(search_terms, '{}'), raw, observed_at, pg_current_xact_id()
    FROM p_eff ORDER BY id
    ON CONFLICT (id) DO UPDATE SET
      conversation_id = coalesce(excluded.conversation_id, p.conversation_id),
      author_id = coalesce(excluded.author_id, p.author_id),
      -- A copy without its references (an included one) never unhooks a reply from its parent.
      in_reply_to_user_id = coalesce(excluded.in_reply_to_user_id, p.in_reply_to_user_id),
      in_reply_to_post_id = coalesce(excluded.in_reply_to_post_id, p.in_reply_to_post_id),
      text = excluded.text, lang = excluded.lang,
      retweet_count = excluded.retweet_count, reply_count = excluded.reply_count,
      like_count = excluded.like_count, quote_count = excluded.quote_count,
      bookmark_count = excluded.bookmark_count, impression_count = excluded.impression_count,
      search_terms = excluded.search_terms, raw = excluded.raw,
      observed_at = excluded.observed_at, stored_xid = excluded.stored_xid,
      updated_at = clock_timestamp()
    WHERE p.observed_at < excluded.observed_at
    -- posts is partitioned, and a partitioned table has no xmax to return: a row is new when its
    -- two default times are still equal (a replacement's clock time is later than any insert's).
    RETURNING p.id, p.conversation_id, p.in_reply_to_post_id, p.created_at,
      (p.updated_at = p.stored_at) AS inserted
  ),
  new_posts AS (SELECT * FROM p_up WHERE inserted),
  -- Quotes and retweets only (postsParams' q): a reply's parent is posts.in_reply_to_post_id
  -- (indexed), so replied_to references get no row. Read from p_rows, so that p_in has one reader
  -- and is not materialized.
  refs AS (
    INSERT INTO post_references (post_id, type, referenced_id)
    SELECT (x.r->>'id')::bigint, q.type, q.id::bigint
    FROM p_rows x CROSS JOIN LATERAL jsonb_to_recordset(x.q) AS q(type text, id text)
    ORDER BY 1, 2, 3
    ON CONFLICT DO NOTHING
  ),
  -- Counters grow by the Posts newly inserted; version by every Post stored or replaced (a
  -- replaced copy may bring likes, a parent or the root's reply count), so a tree a reader built
  -- at one version stands until the next (docs/api.md §5).
  conv AS (
    INSERT INTO conversations AS c (
      id, root_post_id, post_count, reply_count, first_created_at, last_created_at, version)
    SELECT conversation_id,
      max(id) FILTER (WHERE id = conversation_id),
      count(*) FILTER (WHERE inserted),
      count(*) FILTER (WHERE inserted AND in_reply_to_post_id IS NOT NULL),
      min(created_at), max(created_at), 1
    FROM p_up WHERE conversation_id IS NOT NULL
    GROUP BY conversation_id ORDER BY conversation_id
    ON CONFLICT (id) DO UPDATE SET
      root_post_id = coalesce(c.root_post_id, excluded.root_post_id),
      post_count = c.post_count + excluded.post_count,
      reply_count = c.reply_count + excluded.reply_count,
      first_created_at = least(c.first_created_at, excluded.first_created_at),
      last_created_at = greatest(c.last_created_at, excluded.last_created_at),
      version = c.version + 1,
      updated_at = now()
  ),
  rej AS (
    INSERT INTO ingest_rejects (source, reason, raw)
    SELECT $6, reason, raw FROM jsonb_to_recordset($5::jsonb) AS x(reason text, raw text)
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
    jsonb_array_length($5::jsonb) AS rejects
`

/**
 * Stores a normalized batch in one statement (hence one transaction): users, Posts, references,
 * conversation counters, rejects and the outbox row. Each input set travels as a few array or
 * jsonb parameters (postsParams, usersParams), so the cost is one round trip whatever the batch size.
 *
 * Idempotent and order-free:
 * - a Post is inserted once (ON CONFLICT); only a copy observed later replaces its columns;
 * - conversation counters grow only by the Posts this statement newly inserted (see p_up's
 *   RETURNING), so a redelivered batch changes nothing;
 * - root, first and last times are coalesce/least/greatest, so arrival order does not matter.
 * Rows are fed in id order so concurrent batches lock shared rows in the same order.
 *
 * A copy seen only in includes refreshes a stored Post or user at most once a minute (see p_eff
 * and u_eff). Its text never changes (every input is a parameter), so it runs as a named prepared
 * statement: a writer parses and plans it once per connection, not once per batch.
 */
export function storeBatch(db: Db, batch: NormalizedBatch, source: string): Promise<StoreResult> {
  if (batch.posts.length === 0 && batch.users.length === 0 && batch.rejects.length === 0) {
    return Promise.resolve({ inserted: 0, updated: 0, users: 0, rejects: 0, outbox: [] })
  }
  const posts = postsParams(batch.posts)
  const users = usersParams(batch.users)
  const rejects = JSON.stringify(batch.rejects)
  // Only the parameters are kept while Postgres works, not the batch's objects (see storeLines).
  return runStore(db, [posts.raw, posts.rest, users.raw, users.observed, rejects, source])
}

async function runStore(db: Db, values: readonly unknown[]): Promise<StoreResult> {
  const [row] = await queryRows<{
    outbox_id: string | null
    outbox_payload: OutboxPayload | null
    inserted: string
    updated: string
    users: string
    rejects: number
  }>(db, STORE_BATCH, values, { prepare: true })
  return {
    inserted: Number(row!.inserted),
    updated: Number(row!.updated),
    users: Number(row!.users),
    rejects: Number(row!.rejects),
    outbox:
      row!.outbox_id && row!.outbox_payload
        ? [{ id: row!.outbox_id, payload: row!.outbox_payload }]
        : [],
  }
}
