import { sql, type Kysely, type Transaction } from 'kysely'
import {
  compareIds,
  isId,
  snowflakeTime,
  withdrawalReason,
  type ComplianceAction,
  type ComplianceEvent,
} from '@threadline/domain'
import type { Db } from '../connect.js'
import { isPartitioned, listPartitions } from '../partitions.js'
import type { Database } from '../tables/index.js'

// What X withdraws, applied to the store (docs/api.md §7, docs/architecture.md "Compliance").
//
// The compliance log is the truth: every event is logged once, and the state of each Post and user
// an event touches is then recomputed from the log, so events may arrive in any order and any
// number of times. A Post is deleted once any `delete` is logged for it (never reversed); else
// hidden when its latest drop/undrop is a drop or its author is hidden; a user is hidden when its
// latest hiding or un-hiding event hides it.

type Trx = Transaction<Database>

/** A Post erased by this call, for erasing it from what was published (eraseStoredPosts). */
export interface ErasedPost {
  id: string
  conversationId: string | null
  storedAt: Date
}

export interface ComplianceApplied {
  /** Events logged (and applied) by this call. */
  applied: number
  /** Events logged before (or twice in this call): they changed nothing. */
  repeated: number
  /**
   * Posts erased by this call: their content may still be in the `stored` stream, which
   * @threadline/redis `eraseStoredPosts` clears after commit.
   */
  erased: ErasedPost[]
  /** Conversations whose Posts changed (each got a new version): held trees are stale. */
  conversations: string[]
}

/** User events that hide a user (and its Posts) and those that reverse them. */
const USER_HIDING: readonly ComplianceAction[] = ['user_protect', 'user_suspend', 'user_delete']
const USER_UNHIDING: readonly ComplianceAction[] = [
  'user_unprotect',
  'user_unsuspend',
  'user_undelete',
]
/** Reasons a Post is hidden because of its author, hence cleared when the author is shown again. */
const USER_REASONS = ['protected', 'suspended', 'deactivated', 'deleted']

interface LoggedEvent {
  seq: string
  kind: 'tweet' | 'user'
  target_id: string
  author_id: string | null
  action: ComplianceAction
  reason: string | null
  detail: Record<string, unknown> | null
  event_at: Date
  received_at: Date
  source: ComplianceEvent['source']
}

function detailOf(e: ComplianceEvent): Record<string, unknown> | null {
  const detail: Record<string, unknown> = {}
  if (e.withheldInCountries) detail.withheld_in_countries = e.withheldInCountries
  if (e.upToTweetId) detail.up_to_tweet_id = e.upToTweetId
  if (e.initialTweetId) detail.initial_tweet_id = e.initialTweetId
  if (e.editTweetIds) detail.edit_tweet_ids = e.editTweetIds
  if (e.profileField !== undefined) detail.profile_field = e.profileField
  if (e.newValue !== undefined) detail.new_value = e.newValue
  return Object.keys(detail).length > 0 ? detail : null
}

function eventOf(row: LoggedEvent): ComplianceEvent & { seq: string } {
  const d = row.detail ?? {}
  const e: ComplianceEvent & { seq: string } = {
    seq: row.seq,
    kind: row.kind,
    id: row.target_id,
    action: row.action,
    eventAt: row.event_at.toISOString(),
    receivedAt: row.received_at.toISOString(),
    source: row.source,
  }
  if (row.author_id !== null) e.authorId = row.author_id
  if (row.reason !== null) e.reason = row.reason
  if (Array.isArray(d.withheld_in_countries)) e.withheldInCountries = d.withheld_in_countries
  if (typeof d.up_to_tweet_id === 'string') e.upToTweetId = d.up_to_tweet_id
  if (typeof d.initial_tweet_id === 'string') e.initialTweetId = d.initial_tweet_id
  if (Array.isArray(d.edit_tweet_ids)) e.editTweetIds = d.edit_tweet_ids
  if (typeof d.profile_field === 'string') e.profileField = d.profile_field
  if (typeof d.new_value === 'string') e.newValue = d.new_value
  return e
}

/**
 * Logs the events not logged yet (in event_at order) and returns them. A Post's author, when the
 * event does not name it, is taken from the stored Post before it is erased.
 */
async function logEvents(trx: Trx, events: readonly ComplianceEvent[]): Promise<LoggedEvent[]> {
  const rows = events.map((e) => ({
    kind: e.kind,
    target_id: e.id,
    author_id: e.authorId ?? null,
    action: e.action,
    reason: e.reason ?? null,
    detail: detailOf(e),
    event_at: e.eventAt,
    received_at: e.receivedAt,
    source: e.source,
  }))
  const { rows: logged } = await sql<LoggedEvent>`
    INSERT INTO compliance_log (
      kind, target_id, author_id, action, reason, detail, event_at, received_at, source)
    SELECT e.kind, e.target_id,
      coalesce(e.author_id, CASE WHEN e.kind = 'tweet'
        THEN (SELECT p.author_id FROM posts p WHERE p.id = e.target_id) END),
      e.action, e.reason, e.detail, e.event_at, e.received_at, e.source
    FROM jsonb_to_recordset(${JSON.stringify(rows)}::jsonb) AS e(
      kind text, target_id bigint, author_id bigint, action text, reason text, detail jsonb,
      event_at timestamptz, received_at timestamptz, source text)
    ORDER BY e.event_at, e.target_id
    ON CONFLICT DO NOTHING
    RETURNING seq::text, kind, target_id::text, author_id::text, action, reason, detail,
      event_at, received_at, source`.execute(trx)
  return logged
}

/** The id ranges posts has partitions for (none: not partitioned, every id fits). */
async function postIdFits(trx: Trx): Promise<(id: string) => boolean> {
  if (!(await isPartitioned(trx as Kysely<any>, 'posts'))) return () => true
  const ranges = await listPartitions(trx as Kysely<any>, 'posts')
  return (id) =>
    ranges.some(
      (r) => (r.from === undefined || compareIds(r.from, id) <= 0) && compareIds(id, r.to) < 0,
    )
}

/** created_at of a placeholder: the snowflake's time, else the event's. */
const placeholderTime = (id: string, eventAt: Date): string =>
  (snowflakeTime(id) ?? eventAt).toISOString()

/**
 * Users: each user an event touched takes the state of its latest hiding or un-hiding event in
 * the log (a placeholder row when the user is hidden before it is stored); its Posts follow
 * (hidden with the user's reason, or shown again when that is why they were hidden). Withheld
 * countries follow the latest user_withheld.
 */
async function applyUserStates(trx: Trx, userIds: readonly string[]): Promise<string[]> {
  if (userIds.length === 0) return []
  const { rows } = await sql<{ conversation_id: string }>`
    WITH touched AS (SELECT unnest(${userIds}::bigint[]) AS id),
    latest AS (
      SELECT t.id, l.action, l.reason, l.event_at
      FROM touched t CROSS JOIN LATERAL (
        SELECT action, reason, event_at FROM compliance_log
        WHERE kind = 'user' AND target_id = t.id
          AND action = ANY(${[...USER_HIDING, ...USER_UNHIDING]}::text[])
        ORDER BY event_at DESC, seq DESC LIMIT 1) l
    ),
    state AS (
      SELECT id, event_at,
        CASE WHEN action = ANY(${USER_HIDING}::text[]) THEN 'hidden' END AS withdrawn,
        CASE WHEN action = ANY(${USER_HIDING}::text[]) THEN coalesce(reason,
          CASE action WHEN 'user_protect' THEN 'protected' WHEN 'user_suspend' THEN 'suspended'
            ELSE 'deactivated' END) END AS reason
      FROM latest
    ),
    users_set AS (
      INSERT INTO users AS u (id, name, username, raw, observed_at,
        withdrawn, withdrawn_reason, withdrawn_at)
      SELECT id, '', '', jsonb_build_object('id', id::text), '-infinity', withdrawn, reason, event_at
      FROM state WHERE withdrawn IS NOT NULL ORDER BY id
      ON CONFLICT (id) DO UPDATE SET withdrawn = excluded.withdrawn,
        withdrawn_reason = excluded.withdrawn_reason, withdrawn_at = excluded.withdrawn_at,
        updated_at = now()
      WHERE u.withdrawn IS DISTINCT FROM 'deleted'
        AND (u.withdrawn, u.withdrawn_reason, u.withdrawn_at)
          IS DISTINCT FROM (excluded.withdrawn, excluded.withdrawn_reason, excluded.withdrawn_at)
    ),
    users_shown AS (
      UPDATE users u SET withdrawn = NULL, withdrawn_reason = NULL, withdrawn_at = s.event_at,
        updated_at = now()
      FROM state s WHERE u.id = s.id AND s.withdrawn IS NULL
        AND u.withdrawn IS NOT DISTINCT FROM 'hidden' AND u.observed_at > '-infinity'
    ),
    -- A placeholder with nothing withdrawn any more is no user at all.
    user_placeholders_gone AS (
      DELETE FROM users u USING state s WHERE u.id = s.id AND s.withdrawn IS NULL
        AND u.withdrawn = 'hidden' AND u.observed_at = '-infinity'
    ),
    posts_hidden AS (
      UPDATE posts p SET withdrawn = 'hidden', withdrawn_reason = s.reason,
        withdrawn_at = s.event_at, updated_at = clock_timestamp()
      FROM state s WHERE s.withdrawn IS NOT NULL AND p.author_id = s.id AND p.withdrawn IS NULL
      RETURNING p.conversation_id
    ),
    posts_shown AS (
      UPDATE posts p SET withdrawn = NULL, withdrawn_reason = NULL,
        withdrawn_at = s.event_at, updated_at = clock_timestamp()
      FROM state s WHERE s.withdrawn IS NULL AND p.author_id = s.id AND p.withdrawn = 'hidden'
        AND p.withdrawn_reason = ANY(${USER_REASONS}::text[])
        -- A Post hidden by its own drop stays hidden.
        AND NOT coalesce((SELECT l.action = 'drop' FROM compliance_log l
          WHERE l.kind = 'tweet' AND l.target_id = p.id AND l.action IN ('drop', 'undrop')
          ORDER BY l.event_at DESC, l.seq DESC LIMIT 1), false)
      RETURNING p.conversation_id
    )
    SELECT DISTINCT conversation_id::text AS conversation_id FROM (
      SELECT conversation_id FROM posts_hidden UNION ALL SELECT conversation_id FROM posts_shown) c
    WHERE conversation_id IS NOT NULL`.execute(trx)
  return rows.map((r) => r.conversation_id)
}

/** The touched Posts that have a partition, with the time a placeholder of each would take. */
type TouchedPosts = ReadonlyArray<{ id: string; placeholder_at: string }>

/** The touched Posts as a table, for a statement's `WITH touched AS (…)`. */
const touchedTable = (touched: TouchedPosts) =>
  sql`SELECT * FROM jsonb_to_recordset(${JSON.stringify(touched)}::jsonb)
    AS t(id bigint, placeholder_at timestamptz)`

/** The Posts an event touched: erased when a delete is logged, else hidden or shown. */
async function applyPostStates(
  trx: Trx,
  touched: ReadonlyArray<{ id: string; eventAt: Date }>,
): Promise<{ conversations: string[]; erased: ErasedPost[] }> {
  const none = { conversations: [], erased: [] }
  if (touched.length === 0) return none
  const fits = await postIdFits(trx)
  // A placeholder needs a partition; an id with none (expired, or far ahead) is only logged.
  const input = touched
    .filter((t) => fits(t.id))
    .map((t) => ({ id: t.id, placeholder_at: placeholderTime(t.id, t.eventAt) }))
  if (input.length === 0) return none
  const erased = await erasePosts(trx, input)
  const toggled = await hideOrShowPosts(trx, input)
  if (erased.length > 0) {
    const ids = erased.map((r) => r.id)
    await eraseCopies(trx, ids)
    await eraseDeletedAuthors(trx, ids)
  }
  return {
    conversations: [
      ...erased.flatMap((r) => (r.conversation_id ? [r.conversation_id] : [])),
      ...toggled,
    ],
    erased: erased.flatMap((r) =>
      r.stored_at ? [{ id: r.id, conversationId: r.conversation_id, storedAt: r.stored_at }] : [],
    ),
  }
}

/**
 * Erases the touched Posts with a delete logged: the row keeps its id, conversation, parent, time
 * and the withdrawal; its other references and mentions go. A Post not stored yet becomes that
 * row. Returns the rows erased by this call.
 */
async function erasePosts(
  trx: Trx,
  touched: TouchedPosts,
): Promise<Array<{ id: string; conversation_id: string | null; stored_at: Date | null }>> {
  const { rows } = await sql<{
    id: string
    conversation_id: string | null
    stored_at: Date | null
  }>`
    WITH touched AS (${touchedTable(touched)}),
    deleted AS (
      SELECT t.id, t.placeholder_at, d.event_at AS deleted_at, d.reason AS deleted_reason
      FROM touched t
      CROSS JOIN LATERAL (
        SELECT event_at, coalesce(reason, 'deleted') AS reason FROM compliance_log
        WHERE kind = 'tweet' AND target_id = t.id AND action = 'delete'
        ORDER BY event_at, seq LIMIT 1) d
    ),
    erased AS (
      INSERT INTO posts AS p (id, text, created_at, raw, observed_at, search_terms,
        withdrawn, withdrawn_reason, withdrawn_at)
      SELECT id, '', placeholder_at, jsonb_build_object('id', id::text), '-infinity', '{}',
        'deleted', deleted_reason, deleted_at
      FROM deleted ORDER BY id
      ON CONFLICT (id) DO UPDATE SET
        author_id = NULL, in_reply_to_user_id = NULL, text = '', lang = NULL,
        retweet_count = NULL, reply_count = NULL, like_count = NULL, quote_count = NULL,
        bookmark_count = NULL, impression_count = NULL, search_terms = '{}',
        raw = jsonb_strip_nulls(jsonb_build_object(
          'id', p.id::text,
          'conversation_id', p.conversation_id::text,
          'created_at', to_char(p.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
          'referenced_tweets', CASE WHEN p.in_reply_to_post_id IS NOT NULL THEN
            jsonb_build_array(jsonb_build_object(
              'type', 'replied_to', 'id', p.in_reply_to_post_id::text)) END)),
        withheld_in_countries = NULL,
        withdrawn = 'deleted', withdrawn_reason = excluded.withdrawn_reason,
        withdrawn_at = excluded.withdrawn_at, updated_at = clock_timestamp()
      WHERE p.withdrawn IS DISTINCT FROM 'deleted'
      RETURNING p.id, p.conversation_id, p.stored_at
    ),
    references_erased AS (
      DELETE FROM post_references r USING erased e WHERE r.post_id = e.id
    ),
    mentions_erased AS (
      DELETE FROM post_mentions m USING erased e WHERE m.post_id = e.id
    )
    SELECT id::text AS id, conversation_id::text AS conversation_id, stored_at FROM erased`.execute(
    trx,
  )
  return rows
}

/**
 * Hides or shows the touched Posts with no delete logged: by the latest drop/undrop, or hidden
 * while the author is. A drop before the Post is stored leaves a hidden placeholder for its
 * content to fill. Returns the conversations of the Posts changed.
 */
async function hideOrShowPosts(trx: Trx, touched: TouchedPosts): Promise<string[]> {
  const { rows } = await sql<{ conversation_id: string | null }>`
    WITH touched AS (${touchedTable(touched)}),
    state AS (
      SELECT t.id, t.placeholder_at,
        x.action AS toggle, x.reason AS toggle_reason, x.event_at AS toggle_at
      FROM touched t
      CROSS JOIN LATERAL (
        SELECT action, coalesce(reason, 'dropped') AS reason, event_at FROM compliance_log
        WHERE kind = 'tweet' AND target_id = t.id AND action IN ('drop', 'undrop')
        ORDER BY event_at DESC, seq DESC LIMIT 1) x
      WHERE NOT EXISTS (SELECT FROM compliance_log
        WHERE kind = 'tweet' AND target_id = t.id AND action = 'delete')
    ),
    toggled AS (
      SELECT s.id, s.placeholder_at,
        CASE WHEN s.toggle = 'drop' THEN 'hidden' WHEN a.withdrawn IS NOT NULL THEN 'hidden' END
          AS withdrawn,
        CASE WHEN s.toggle = 'drop' THEN s.toggle_reason ELSE a.withdrawn_reason END AS reason,
        CASE WHEN s.toggle = 'drop' OR a.withdrawn IS NULL THEN s.toggle_at
          ELSE greatest(s.toggle_at, a.withdrawn_at) END AS at
      FROM state s
      LEFT JOIN posts p ON p.id = s.id
      LEFT JOIN users a ON a.id = p.author_id
    ),
    hidden_placed AS (
      INSERT INTO posts AS p (id, text, created_at, raw, observed_at,
        withdrawn, withdrawn_reason, withdrawn_at)
      SELECT id, '', placeholder_at, jsonb_build_object('id', id::text), '-infinity',
        withdrawn, reason, at
      FROM toggled WHERE withdrawn IS NOT NULL ORDER BY id
      ON CONFLICT (id) DO UPDATE SET withdrawn = excluded.withdrawn,
        withdrawn_reason = excluded.withdrawn_reason, withdrawn_at = excluded.withdrawn_at,
        updated_at = clock_timestamp()
      WHERE p.withdrawn IS DISTINCT FROM 'deleted'
      RETURNING p.conversation_id
    ),
    shown AS (
      UPDATE posts p SET withdrawn = NULL, withdrawn_reason = NULL, withdrawn_at = t.at,
        updated_at = clock_timestamp()
      FROM toggled t WHERE p.id = t.id AND t.withdrawn IS NULL AND p.withdrawn = 'hidden'
        AND p.observed_at > '-infinity'
      RETURNING p.conversation_id
    ),
    -- A hidden placeholder shown again is no Post at all until its content comes (an undrop
    -- logged after it keeps the older drop from hiding it again).
    placeholders_gone AS (
      DELETE FROM posts p USING toggled t WHERE p.id = t.id AND t.withdrawn IS NULL
        AND p.withdrawn = 'hidden' AND p.observed_at = '-infinity'
    )
    SELECT conversation_id::text AS conversation_id FROM hidden_placed
    UNION ALL SELECT conversation_id::text FROM shown`.execute(trx)
  return rows.flatMap((r) => (r.conversation_id ? [r.conversation_id] : []))
}

/**
 * A user X deleted (user_delete) whose Posts' deletes now come is gone for good: its profile is
 * erased too (name, username and raw but the id), and it stays so (users.withdrawn 'deleted').
 * Until then user_undelete may still bring the account back.
 */
async function eraseDeletedAuthors(trx: Trx, postIds: readonly string[]): Promise<void> {
  await sql`
    UPDATE users u SET name = '', username = '', raw = jsonb_build_object('id', u.id::text),
      withheld_in_countries = NULL, withdrawn = 'deleted', updated_at = now()
    WHERE u.withdrawn = 'hidden' AND u.withdrawn_reason IN ('deactivated', 'deleted')
      AND u.id IN (SELECT l.author_id FROM compliance_log l
        WHERE l.kind = 'tweet' AND l.action = 'delete' AND l.target_id = ANY(${postIds}::bigint[]))`.execute(
    trx,
  )
}

/**
 * Other rows that hold a Post as text: webhook events waiting or parked (a reply's event that
 * includes it too) and lines kept as rejects. One that names an erased Post goes, so its content
 * is in no row afterwards. Each is a scan of a table that is small in a healthy deployment.
 */
async function eraseCopies(trx: Trx, ids: readonly string[]): Promise<void> {
  const patterns = ids.map((id) => `%"id":"${id}"%`)
  await sql`DELETE FROM webhook_deliveries WHERE body LIKE ANY(${patterns}::text[])`.execute(trx)
  await sql`DELETE FROM webhook_failures WHERE body LIKE ANY(${patterns}::text[])`.execute(trx)
  await sql`DELETE FROM ingest_rejects WHERE raw LIKE ANY(${patterns}::text[])`.execute(trx)
}

/** Withheld countries (the latest event of each Post or user wins) and geo scrubbing. */
async function applyWithheldAndGeo(trx: Trx, events: readonly LoggedEvent[]): Promise<string[]> {
  const withheld = events
    .filter((e) => e.action === 'withheld' || e.action === 'user_withheld')
    .map((e) => ({ kind: e.kind, id: e.target_id }))
  const scrubs = events
    .filter((e) => e.action === 'scrub_geo')
    .map((e) => ({
      kind: e.kind,
      id: e.target_id,
      up_to: String((e.detail ?? {}).up_to_tweet_id ?? e.target_id),
    }))
  const conversations: string[] = []
  // Two statements: one statement's CTEs may not both change one row.
  if (withheld.length > 0) {
    const { rows } = await sql<{ conversation_id: string | null }>`
      WITH w AS (
        SELECT x.kind, x.id, l.detail->'withheld_in_countries' AS codes
        FROM jsonb_to_recordset(${JSON.stringify(withheld)}::jsonb) AS x(kind text, id bigint)
        CROSS JOIN LATERAL (
          SELECT detail FROM compliance_log
          WHERE kind = x.kind AND target_id = x.id
            AND action = CASE x.kind WHEN 'tweet' THEN 'withheld' ELSE 'user_withheld' END
          ORDER BY event_at DESC, seq DESC LIMIT 1) l
      ),
      users_withheld AS (
        UPDATE users u SET withheld_in_countries = ARRAY(
            SELECT jsonb_array_elements_text(w.codes)), updated_at = now()
        FROM w WHERE w.kind = 'user' AND u.id = w.id
      )
      UPDATE posts p SET withheld_in_countries = ARRAY(
          SELECT jsonb_array_elements_text(w.codes)), updated_at = clock_timestamp()
      FROM w WHERE w.kind = 'tweet' AND p.id = w.id AND p.withdrawn IS DISTINCT FROM 'deleted'
      RETURNING p.conversation_id::text`.execute(trx)
    conversations.push(...rows.flatMap((r) => (r.conversation_id ? [r.conversation_id] : [])))
  }
  if (scrubs.length > 0) {
    const { rows } = await sql<{ conversation_id: string | null }>`
      UPDATE posts p SET raw = p.raw - 'geo', updated_at = clock_timestamp()
      FROM jsonb_to_recordset(${JSON.stringify(scrubs)}::jsonb) AS s(kind text, id bigint, up_to bigint)
      WHERE p.raw ? 'geo' AND (
        (s.kind = 'user' AND p.author_id = s.id AND p.id <= s.up_to)
        OR (s.kind = 'tweet' AND p.id = s.id))
      RETURNING p.conversation_id::text`.execute(trx)
    conversations.push(...rows.flatMap((r) => (r.conversation_id ? [r.conversation_id] : [])))
  }
  return conversations
}

/** A held tree or metrics of these conversations is stale: their version grows. */
async function bumpConversations(trx: Trx, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  const sorted = [...new Set(ids)].sort(compareIds)
  await sql`
    UPDATE conversations SET version = version + 1, updated_at = now()
    WHERE id = ANY(${sorted}::bigint[])`.execute(trx)
}

const byEventTime = (a: ComplianceEvent, b: ComplianceEvent) =>
  a.eventAt < b.eventAt ? -1 : a.eventAt > b.eventAt ? 1 : compareIds(a.id, b.id)

/**
 * Applies events idempotently in one transaction, in event_at order per id; a repeat changes
 * nothing. Each event is logged once; each Post and user it touches then takes the state the whole
 * log gives it, so the order in which events arrive does not matter. Erasure happens in this
 * transaction (docs/api.md §7), and every conversation whose Posts changed gets a new version.
 */
export async function applyComplianceEvents(
  db: Db,
  events: readonly ComplianceEvent[],
): Promise<ComplianceApplied> {
  const valid = events.filter((e) => isId(e.id) && (e.authorId === undefined || isId(e.authorId)))
  if (valid.length !== events.length) throw new TypeError('a compliance event has a malformed id')
  if (events.length === 0) return { applied: 0, repeated: 0, erased: [], conversations: [] }
  const sorted = [...events].sort(byEventTime)
  return db.transaction().execute(async (trx) => {
    const logged = await logEvents(trx, sorted)
    const users = new Set<string>()
    const posts = new Map<string, Date>()
    for (const e of logged) {
      if (e.kind === 'user' && [...USER_HIDING, ...USER_UNHIDING].includes(e.action)) {
        users.add(e.target_id)
      }
      if (e.kind === 'tweet' && ['delete', 'drop', 'undrop'].includes(e.action)) {
        posts.set(e.target_id, e.event_at)
      }
    }
    // Users first: a Post's own state reads its author's.
    const byUsers = await applyUserStates(trx, [...users].sort(compareIds))
    const byPosts = await applyPostStates(
      trx,
      [...posts].sort(([a], [b]) => compareIds(a, b)).map(([id, eventAt]) => ({ id, eventAt })),
    )
    const byOthers = await applyWithheldAndGeo(trx, logged)
    const conversations = [...new Set([...byUsers, ...byPosts.conversations, ...byOthers])].sort(
      compareIds,
    )
    await bumpConversations(trx, conversations)
    return {
      applied: logged.length,
      repeated: events.length - logged.length,
      erased: byPosts.erased,
      conversations,
    }
  })
}

/** The log in seq order, for the compliance streams' replay. */
export async function complianceLogPage(
  db: Db,
  q: {
    kind: 'tweet' | 'user'
    startTime?: string
    endTime?: string
    afterSeq?: string
    limit: number
  },
): Promise<Array<ComplianceEvent & { seq: string }>> {
  const { rows } = await sql<LoggedEvent>`
    SELECT seq::text, kind, target_id::text, author_id::text, action, reason, detail, event_at,
      received_at, source
    FROM compliance_log
    WHERE kind = ${q.kind}
      AND (${q.startTime ?? null}::timestamptz IS NULL OR event_at >= ${q.startTime ?? null}::timestamptz)
      AND (${q.endTime ?? null}::timestamptz IS NULL OR event_at < ${q.endTime ?? null}::timestamptz)
      AND seq > ${q.afterSeq ?? '0'}::bigint
    -- The column, not the text alias above: by text, seq 100 would sort before 99.
    ORDER BY compliance_log.seq LIMIT ${Math.max(0, Math.floor(q.limit))}`.execute(db)
  return rows.map(eventOf)
}

/**
 * Of `ids`, those withdrawn (deleted or hidden), for batch job results: X's `action` is always
 * `delete`, `reason` says why, `eventAt` is when it was withdrawn.
 */
export async function withdrawnAmong(
  db: Db,
  kind: 'tweet' | 'user',
  ids: readonly string[],
): Promise<Array<{ id: string; action: string; reason: string; eventAt: string }>> {
  const valid = ids.filter(isId)
  if (valid.length === 0) return []
  const table = kind === 'tweet' ? sql`posts` : sql`users`
  const { rows } = await sql<{
    id: string
    withdrawn: string
    reason: string | null
    at: Date | null
  }>`
    SELECT t.id::text, t.withdrawn, t.withdrawn_reason AS reason, t.withdrawn_at AS at
    FROM ${table} t
    -- The array as an init-plan parameter, not a constant: with a constant the planner prunes
    -- partitions id by id (for 20,000 ids it planned longer than it ran); this way each
    -- partition's index is probed at run time.
    WHERE t.id = ANY((SELECT ${valid}::bigint[])::bigint[]) AND t.withdrawn IS NOT NULL
    ORDER BY t.id`.execute(db)
  return rows.map((r) => ({
    id: r.id,
    action: 'delete',
    reason:
      r.reason ??
      withdrawalReason({ action: r.withdrawn === 'deleted' ? 'delete' : 'drop' }) ??
      'deleted',
    eventAt: (r.at ?? new Date(0)).toISOString(),
  }))
}
