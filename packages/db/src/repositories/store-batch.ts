import type { NormalizedBatch, PostRow, UserRow } from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'
import type { OutboxPayload } from '../tables/index.js'

/**
 * How long a stored copy of a Post or user stands against a newer copy that brings no news (a Post
 * seen only in another's includes, a user under the same name): within it the stored row is left
 * alone, or a viral root would be rewritten (tuple, indexes, GIN) by every reply and its row lock
 * serialise the writers. Primary Posts and renamed users always apply.
 */
export const INCLUDED_REFRESH_MS = 60_000

export interface StoreResult {
  /** Posts stored for the first time. */
  inserted: number
  /** Posts already stored, replaced by a newer copy. */
  updated: number
  users: number
  /** Rejects newly kept (a batch stored again keeps none twice). */
  rejects: number
  /**
   * The outbox row this statement wrote (none when it stored nothing new), so the writer can
   * publish it right after commit and delete it; the relay covers a crash in between.
   */
  outbox: Array<{ id: string; payload: OutboxPayload }>
}

/** What normalizing derived from a Post that its upstream object does not hold as such. */
interface DerivedPostFields {
  search_terms: string[]
  /** Normalized, or taken from the id when the object has none. */
  created_at: string
  in_reply_to_post_id: string | null
  /** Its quotes and retweets (omitted when none): replies are `in_reply_to_post_id`. */
  quotes?: Array<{ type: string; id: string }>
  observed_at: string
  included: boolean
}

/**
 * The Posts as the statement reads them: `raw`, a JSON array of the upstream objects, and
 * `derived`, a JSON array of what normalizing derived (element i of each is Post i). The statement
 * reads every other column out of `raw`, where normalizeLines validated it.
 */
export function postsParams(rows: readonly PostRow[]): { raw: string; derived: string } {
  return {
    raw: JSON.stringify(rows.map((p) => p.raw)),
    derived: JSON.stringify(
      rows.map((p): DerivedPostFields => {
        const quotes = p.refs.filter((r) => r.type !== 'replied_to')
        return {
          search_terms: p.search_terms,
          created_at: p.created_at,
          in_reply_to_post_id: p.in_reply_to_post_id,
          ...(quotes.length > 0 ? { quotes } : {}),
          observed_at: p.observed_at,
          included: p.included,
        }
      }),
    ),
  }
}

/** Users as the statement reads them: raw (id, name and username are read out of it), observed_at. */
export function usersParams(rows: readonly UserRow[]): { raw: string; observed_at: string[] } {
  return {
    raw: JSON.stringify(rows.map((u) => u.raw)),
    observed_at: rows.map((u) => u.observed_at),
  }
}

/**
 * $1–$2 postsParams, $3–$4 usersParams, $5 the rejects (jsonb), $6 their source, $7 the batch id
 * (null: none), $8 INCLUDED_REFRESH_MS as an interval, $9 the batch's Post ids. Steps: users →
 * withdrawn authors → posts → references → conversation counters → rejects → outbox.
 */
const STORE_BATCH = `
  WITH
  -- Element i of $1 is Post i of $2. Materialized: posts_in and references_added both read it.
  post_input AS MATERIALIZED (
    SELECT *
    FROM ROWS FROM (jsonb_array_elements($1::jsonb), jsonb_to_recordset($2::jsonb)
        AS (search_terms text[], created_at timestamptz, in_reply_to_post_id bigint, quotes jsonb,
            observed_at timestamptz, included boolean))
      AS x(raw, search_terms, created_at, in_reply_to_post_id, quotes, observed_at, included)
  ),

  -- 1. Users.
  users_in AS (
    SELECT (raw->>'id')::bigint AS id, raw->>'name' AS name, raw->>'username' AS username,
      raw, observed_at
    FROM ROWS FROM (jsonb_array_elements($3::jsonb), unnest($4::timestamptz[]))
      AS x(raw, observed_at)
  ),
  users_before AS (
    SELECT u.id, u.name, u.username, u.observed_at, u.withdrawn FROM users u
    WHERE u.id IN (SELECT id FROM users_in)
  ),
  -- Only the users this batch changes: new ones, renamed ones, and stored copies older than the
  -- refresh interval. ON CONFLICT DO UPDATE locks a conflicting row before it reads its WHERE, so
  -- a user left alone there would still get a row lock (a tuple write, a WAL record) and make a
  -- concurrent batch carrying it wait. Read on this statement's snapshot: a user that another
  -- batch changes meanwhile ends as if that batch had committed after this one.
  users_to_write AS (
    SELECT n.* FROM users_in n LEFT JOIN users_before o ON o.id = n.id
    -- A user X deleted for good keeps no profile (docs/api.md §7).
    WHERE o.id IS NULL OR (o.withdrawn IS DISTINCT FROM 'deleted'
      AND o.observed_at < n.observed_at AND (
        o.name <> n.name OR o.username <> n.username
        OR o.observed_at < n.observed_at - $8::interval))
  ),
  users_written AS (
    INSERT INTO users AS u (id, name, username, raw, observed_at)
    SELECT id, name, username, raw, observed_at FROM users_to_write ORDER BY id
    ON CONFLICT (id) DO UPDATE SET
      name = excluded.name, username = excluded.username, raw = excluded.raw,
      observed_at = excluded.observed_at, updated_at = now()
    WHERE u.observed_at < excluded.observed_at AND u.withdrawn IS DISTINCT FROM 'deleted'
    RETURNING u.id, u.name, u.username, (xmax = 0) AS inserted
  ),

  -- 2. Posts.
  posts_in AS (
    SELECT (raw->>'id')::bigint AS id, (raw->>'conversation_id')::bigint AS conversation_id,
      (raw->>'author_id')::bigint AS author_id,
      (raw->>'in_reply_to_user_id')::bigint AS in_reply_to_user_id, in_reply_to_post_id,
      raw->>'text' AS text, created_at, raw->>'lang' AS lang,
      -- Validated as integers; via numeric, since JSON may write one as 25.0.
      (raw->'public_metrics'->>'retweet_count')::numeric::integer AS retweet_count,
      (raw->'public_metrics'->>'reply_count')::numeric::integer AS reply_count,
      (raw->'public_metrics'->>'like_count')::numeric::integer AS like_count,
      (raw->'public_metrics'->>'quote_count')::numeric::integer AS quote_count,
      (raw->'public_metrics'->>'bookmark_count')::numeric::integer AS bookmark_count,
      (raw->'public_metrics'->>'impression_count')::numeric::bigint AS impression_count,
      coalesce(search_terms, '{}') AS search_terms,
      -- A Post whose author X geo-scrubbed up to its id or later is stored without geo
      -- (docs/api.md §7); looked up only for the rare Post that has geo.
      CASE WHEN raw ? 'geo' AND EXISTS (SELECT 1 FROM compliance_log l
          WHERE l.kind = 'user' AND l.target_id = (raw->>'author_id')::bigint
            AND l.action = 'scrub_geo'
            AND (l.detail->>'up_to_tweet_id')::bigint >= (raw->>'id')::bigint)
        THEN raw - 'geo' ELSE raw END AS raw,
      observed_at, included
    FROM post_input
  ),
  -- 2a. Withdrawals (docs/api.md §7): a new Post whose author X withdrew is stored hidden, with
  -- the author's reason; a stored Post keeps its state (see posts_written).
  -- Read on this statement's snapshot: an author withdrawn by a compliance transaction that
  -- commits meanwhile is caught by a trigger (the compliance migration).
  authors_withdrawn AS (
    SELECT a.id, a.withdrawn_reason, a.withdrawn_at FROM users a
    -- From post_input, so that posts_in keeps one reader and is not materialized.
    WHERE a.withdrawn IS NOT NULL
      AND a.id IN (SELECT (raw->>'author_id')::bigint FROM post_input)
  ),
  -- A copy seen only in another Post's includes is a metrics refresh: it replaces a stored row
  -- only past the refresh interval. Primary copies always apply.
  -- Probes of posts name the batch's ids ($9) so that the planner keeps only their partitions, not
  -- every day's: target, rows/s falls < 10 % from 1 M to 10 M stored Posts (docs/capacity.md §2).
  posts_to_write AS (
    SELECT n.* FROM posts_in n
    WHERE NOT n.included OR NOT EXISTS (
      SELECT 1 FROM posts s WHERE s.id = n.id AND s.id = ANY($9::bigint[])
        AND s.observed_at >= n.observed_at - $8::interval)
  ),
  posts_written AS (
    INSERT INTO posts AS p (
      id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
      created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
      impression_count, search_terms, raw, observed_at, withdrawn, withdrawn_reason, withdrawn_at)
    SELECT n.id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id, text,
      created_at, lang, retweet_count, reply_count, like_count, quote_count, bookmark_count,
      impression_count, search_terms, raw, observed_at,
      CASE WHEN w.id IS NOT NULL THEN 'hidden' END, w.withdrawn_reason, w.withdrawn_at
    FROM posts_to_write n LEFT JOIN authors_withdrawn w ON w.id = n.author_id ORDER BY n.id
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
      observed_at = excluded.observed_at,
      -- A placeholder that a compliance event left (observed at -infinity) gets its content now:
      -- it counts as stored now, like an insert. Its withdrawal stays as it is.
      stored_at = CASE WHEN p.observed_at = '-infinity' THEN now() ELSE p.stored_at END,
      updated_at = CASE WHEN p.observed_at = '-infinity' THEN now() ELSE clock_timestamp() END
    -- Events win over content: a deleted Post never gets its content back.
    WHERE p.observed_at < excluded.observed_at AND p.withdrawn IS DISTINCT FROM 'deleted'
    -- posts is partitioned, and a partitioned table has no xmax to return: a row is new when its
    -- two default times are still equal (a replacement's clock time is later than any insert's).
    RETURNING p.id, p.conversation_id, p.in_reply_to_post_id, p.created_at,
      (p.updated_at = p.stored_at) AS inserted, p.withdrawn
  ),
  posts_new AS (SELECT * FROM posts_written WHERE inserted),
  -- What open streams and subscriptions get: never a withdrawn Post.
  posts_published AS (SELECT id FROM posts_new WHERE withdrawn IS NULL),

  -- 3. References: quotes and retweets only, since a reply's parent is posts.in_reply_to_post_id
  -- (indexed). Read from post_input, so that posts_in has one reader and is not materialized.
  references_added AS (
    INSERT INTO post_references (post_id, type, referenced_id)
    SELECT (x.raw->>'id')::bigint, q.type, q.id::bigint
    FROM post_input x CROSS JOIN LATERAL jsonb_to_recordset(x.quotes) AS q(type text, id text)
    -- A deleted Post keeps no reference but its parent.
    WHERE NOT EXISTS (SELECT 1 FROM posts d
      WHERE d.id = (x.raw->>'id')::bigint AND d.id = ANY($9::bigint[]) AND d.withdrawn = 'deleted')
    ORDER BY 1, 2, 3
    ON CONFLICT DO NOTHING
  ),

  -- 4. Conversation counters grow by the Posts newly inserted (the inserted flag), so a batch stored again
  -- changes none; version by every Post stored or replaced (a replaced copy may bring likes, a
  -- parent or the root's reply count), so a tree a reader built at one version stands until the
  -- next (docs/api.md §5). Root, first and last are coalesce/least/greatest: order-free.
  conversations_counted AS (
    INSERT INTO conversations AS c (
      id, root_post_id, post_count, reply_count, first_created_at, last_created_at, version)
    SELECT conversation_id,
      max(id) FILTER (WHERE id = conversation_id),
      count(*) FILTER (WHERE inserted),
      count(*) FILTER (WHERE inserted AND in_reply_to_post_id IS NOT NULL),
      min(created_at), max(created_at), 1
    FROM posts_written WHERE conversation_id IS NOT NULL
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

  -- 5. Rejects, once per batch: a job retried after its batch committed keeps none twice.
  rejects_kept AS (
    INSERT INTO ingest_rejects (source, batch_id, reason, raw)
    SELECT $6, $7, reason, raw FROM jsonb_to_recordset($5::jsonb) AS x(reason text, raw text)
    ON CONFLICT (batch_id, md5(reason), md5(raw)) DO NOTHING
    RETURNING 1
  ),

  -- 6. The outbox: what this statement newly stored or changed, hence nothing for a batch stored
  -- again.
  user_changes AS (
    SELECT n.id, o.name AS old_name, o.username AS old_username, n.name, n.username
    FROM users_written n JOIN users_before o ON o.id = n.id
    WHERE NOT n.inserted AND (n.name <> o.name OR n.username <> o.username)
      -- Not a withdrawn user, nor the first content of a compliance placeholder.
      AND o.withdrawn IS NULL AND o.observed_at > '-infinity'
  ),
  outbox_written AS (
    INSERT INTO outbox (payload)
    SELECT jsonb_build_object(
      'post_ids', coalesce((SELECT jsonb_agg(id::text ORDER BY id) FROM posts_published),
        '[]'::jsonb),
      'user_changes', coalesce((SELECT jsonb_agg(jsonb_build_object(
          'id', id::text,
          'before', jsonb_build_object('name', old_name, 'username', old_username),
          'after', jsonb_build_object('name', name, 'username', username)) ORDER BY id)
        FROM user_changes), '[]'::jsonb))
    WHERE EXISTS (SELECT 1 FROM posts_published) OR EXISTS (SELECT 1 FROM user_changes)
    RETURNING id, payload
  )
  SELECT
    (SELECT id::text FROM outbox_written) AS outbox_id,
    (SELECT payload FROM outbox_written) AS outbox_payload,
    (SELECT count(*) FROM posts_new) AS inserted,
    (SELECT count(*) FROM posts_written WHERE NOT inserted) AS updated,
    (SELECT count(*) FROM users_written) AS users,
    (SELECT count(*) FROM rejects_kept) AS rejects
`

const REFRESH_INTERVAL = `${INCLUDED_REFRESH_MS} milliseconds`

/**
 * Stores a normalized batch in one statement (hence one transaction): users, Posts, references,
 * conversation counters, rejects and the outbox row. Each input set travels as a few array or
 * jsonb parameters (postsParams, usersParams), so the cost is one round trip whatever the batch size.
 *
 * Idempotent and order-free: a Post is inserted once (ON CONFLICT) and only a copy observed later
 * replaces its columns; counters and the outbox follow only what this statement newly inserted or
 * changed; a reject is kept once per `batchId` (rejects of calls without one are all kept). Rows
 * are fed in id order so concurrent batches lock shared rows in the same order.
 *
 * Its text never changes (every input is a parameter), so it runs as a named prepared statement:
 * a writer parses and plans it once per connection, not once per batch.
 */
export function storeBatch(
  db: Db,
  batch: NormalizedBatch,
  source: string,
  batchId?: string,
): Promise<StoreResult> {
  if (batch.posts.length === 0 && batch.users.length === 0 && batch.rejects.length === 0) {
    return Promise.resolve({ inserted: 0, updated: 0, users: 0, rejects: 0, outbox: [] })
  }
  const posts = postsParams(batch.posts)
  const users = usersParams(batch.users)
  const rejects = JSON.stringify(batch.rejects)
  // Only the parameters are kept while Postgres works, not the batch's objects (see storeLines).
  return runStore(db, [
    posts.raw,
    posts.derived,
    users.raw,
    users.observed_at,
    rejects,
    source,
    batchId ?? null,
    REFRESH_INTERVAL,
    batch.posts.map((p) => p.id),
  ])
}

async function runStore(db: Db, values: readonly unknown[]): Promise<StoreResult> {
  const [row] = await queryRows<{
    outbox_id: string | null
    outbox_payload: OutboxPayload | null
    inserted: string
    updated: string
    users: string
    rejects: string
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
