import {
  buildConversationTree,
  type ConversationSort,
  type ConversationTree,
  type SkeletonRows,
} from '@threadline/domain'
import { sql } from 'kysely'
import { queryRows, type Db } from '../connect.js'
import { wireColumns, wireJson } from './read-posts.js'

/** A conversation's skeleton as stored: its Posts' tree columns and the root's reported figure. */
export interface ConversationSkeleton {
  /** The conversation row's version when read ('0' when nothing is stored). */
  version: string
  /** The snapshot it was read under (pg_snapshot as text): readSkeletonChanges starts there. */
  snapshot: string
  rows: SkeletonRows
  /** The root's `public_metrics.reply_count` as last seen; undefined without a stored root. */
  reportedReplyCount: number | undefined
  /** Every Post in wire form, when asked for and the conversation holds at most `upTo` Posts. */
  posts?: Map<string, string>
}

/**
 * The skeleton of a conversation's Posts that pass `where` (each `where` bounds ids from the
 * conversation's id: a reply is newer than its root, so only partitions since the root are read), as one row: each tree column as one
 * comma-joined text (element i of each is Post i: one aggregate node feeds them the same rows), so
 * that the client parses five strings rather than a row object per Post. The version and the
 * snapshot are read in the same statement, so a skeleton is labelled with exactly what it holds.
 */
const skeletonOf = (where: string) => `
  SELECT 0 AS kind, (SELECT version::text FROM conversations WHERE id = $1) AS version,
    pg_current_snapshot()::text AS snapshot,
    (SELECT reply_count FROM posts WHERE id = $1) AS reported, count(*)::int AS n,
    string_agg(id::text, ',') AS ids,
    string_agg(coalesce(in_reply_to_post_id::text, ''), ',') AS parents,
    string_agg(coalesce(author_id::text, ''), ',') AS authors,
    string_agg(((date_part('epoch', created_at) * 1000)::bigint)::text, ',') AS ms,
    string_agg(coalesce(like_count, 0)::text, ',') AS likes
  FROM posts WHERE ${where}`

/**
 * Every Post of a conversation, from posts_conversation_tree_idx alone (an index-only scan once
 * vacuum has marked the pages all-visible).
 */
const SKELETON = skeletonOf('conversation_id = $1 AND id >= $1')

/**
 * The Posts of a conversation stored or replaced by a transaction that snapshot $2 did not see:
 * what changed since a skeleton read under $2 (posts_conversation_changes_idx).
 */
const SKELETON_CHANGES = skeletonOf(`conversation_id = $1 AND id >= $1
  AND stored_xid >= pg_snapshot_xmin($2::pg_snapshot)
  AND NOT pg_visible_in_snapshot(stored_xid, $2::pg_snapshot)`)

/**
 * SKELETON, followed by each Post in wire form (the columns of read-posts' wire lookup) when the
 * conversation's counter says it holds at most $2 Posts: a small conversation's page then costs
 * one statement. Above that the second part is a one-time filter that is false; its LIMIT keeps
 * its estimate small, so no plan of it is costly enough to be compiled (JIT). The caller checks
 * that it got every Post. Compiled once per field list.
 */
const skeletonStatements = new Map<string, { sql: string; wanted: string[] }>()

function skeletonWithPosts(db: Db, fields: readonly string[]) {
  const key = fields.join(',')
  let statement = skeletonStatements.get(key)
  if (!statement) {
    const { wanted, columns } = wireColumns(fields)
    // The wire columns are literals and identifiers only: the lookup compiles without parameters.
    const lookup = db
      .selectFrom('posts')
      .select(columns)
      .where(
        sql<boolean>`conversation_id = $1 AND id >= $1 AND (SELECT post_count FROM conversations WHERE id = $1) <= $2`,
      )
      .compile()
    const nulls = wanted.map((_, i) => `, NULL::text AS f${i}`).join('')
    statement = {
      wanted,
      sql: `
        SELECT * FROM (${SKELETON}) head
          CROSS JOIN (SELECT NULL::text AS wire_id, NULL::text AS wire_text${nulls}) none
        UNION ALL
        SELECT 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, w.id::text, w.text${wanted
          .map((_, i) => `, w.f${i}`)
          .join('')}
        FROM (${lookup.sql} LIMIT $2) w`,
    }
    if (skeletonStatements.size < 256) skeletonStatements.set(key, statement)
  }
  return statement
}

type SkeletonRow = {
  kind: number
  version: string | null
  snapshot: string | null
  reported: number | null
  n: number | null
  ids: string | null
  parents: string | null
  authors: string | null
  ms: string | null
  likes: string | null
  wire_id?: string | null
  wire_text?: string | null
  [wire: string]: unknown
}

const orNull = (value: string) => (value === '' ? null : value)

/**
 * Reads the skeleton of one conversation (docs/api.md §5) in one statement; with `posts`, also
 * every Post in wire form (`fields`, as wirePostsByIds) when there are at most `upTo` of them.
 */
export async function readConversationSkeleton(
  db: Db,
  conversationId: string,
  posts?: { fields: readonly string[]; upTo: number },
): Promise<ConversationSkeleton> {
  const statement = posts ? skeletonWithPosts(db, posts.fields) : undefined
  const result = await queryRows<SkeletonRow>(
    db,
    statement?.sql ?? SKELETON,
    posts ? [conversationId, posts.upTo] : [conversationId],
    { prepare: true },
  )
  const head = result.find((r) => r.kind === 0)!
  const n = head.n ?? 0
  let wirePosts: Map<string, string> | undefined
  // Every Post or none: the counter that gates them could be behind the rows.
  if (statement && n > 0 && result.length === n + 1) {
    wirePosts = new Map()
    for (const row of result) {
      if (row.kind !== 1) continue
      // The row is this function's own: named as wireJson reads a lookup's row.
      row.id = row.wire_id
      row.text = row.wire_text
      const { json } = wireJson(row, statement.wanted)
      wirePosts.set(row.wire_id!, json)
    }
  }
  return { ...skeletonFrom(head), ...(wirePosts ? { posts: wirePosts } : {}) }
}

function skeletonFrom(head: SkeletonRow): ConversationSkeleton {
  const n = head.n ?? 0
  const split = (text: string | null) => (n === 0 || text === null ? [] : text.split(','))
  return {
    version: head.version ?? '0',
    snapshot: head.snapshot!,
    rows: {
      ids: split(head.ids),
      parents: split(head.parents).map(orNull),
      authors: split(head.authors).map(orNull),
      createdMs: Float64Array.from(split(head.ms), Number),
      likes: Int32Array.from(split(head.likes), Number),
    },
    reportedReplyCount: head.reported ?? undefined,
  }
}

/**
 * The rows of a conversation's Posts stored or replaced since a skeleton was read under
 * `snapshot` (each Post's current copy), with the version and snapshot they bring the skeleton
 * to. Costs the change, not the conversation: an index range from the snapshot's oldest
 * transaction on.
 */
export async function readSkeletonChanges(
  db: Db,
  conversationId: string,
  snapshot: string,
): Promise<ConversationSkeleton> {
  const [head] = await queryRows<SkeletonRow>(db, SKELETON_CHANGES, [conversationId, snapshot], {
    prepare: true,
  })
  return skeletonFrom(head!)
}

/** The conversation row's version ('0' when there is none), by primary key. */
export async function conversationVersion(db: Db, conversationId: string): Promise<string> {
  const [row] = await queryRows<{ version: string }>(
    db,
    'SELECT version::text AS version FROM conversations WHERE id = $1',
    [conversationId],
    { prepare: true },
  )
  return row?.version ?? '0'
}

const pageStatements = new Map<string, { sql: string; wanted: string[] }>()

/**
 * Posts by id in wire form (as wirePostsByIds) and, in the same statement, the version of their
 * conversation: a page cut from a tree built at that version is answered in one round trip, and
 * one built earlier is told apart.
 */
export async function wirePostsAtVersion(
  db: Db,
  conversationId: string,
  ids: readonly string[],
  fields: readonly string[],
): Promise<{ version: string; posts: Map<string, string> }> {
  const key = fields.join(',')
  let statement = pageStatements.get(key)
  if (!statement) {
    const { wanted, columns } = wireColumns(fields)
    const compiled = db
      .selectFrom('posts')
      .select([
        ...columns,
        sql<string>`(SELECT version::text FROM conversations WHERE id = $2::bigint)`.as(
          'conversation_version',
        ),
      ])
      .where('id', '=', sql<string>`any(${sql.val([])}::bigint[])`)
      .compile()
    statement = { sql: compiled.sql, wanted }
    if (pageStatements.size < 256) pageStatements.set(key, statement)
  }
  const rows = await queryRows<Record<string, unknown>>(db, statement.sql, [ids, conversationId], {
    prepare: true,
  })
  const posts = new Map<string, string>()
  for (const row of rows) {
    const { id, json } = wireJson(row, statement.wanted)
    posts.set(id, json)
  }
  const version = rows.length > 0 ? (rows[0]!.conversation_version as string | null) : null
  return { version: version ?? '0', posts }
}

/**
 * A conversation as a tree, read and built in one go (no caching: the API keeps built trees per
 * version, see its conversations routes). For exports and tools that walk a whole tree.
 */
export async function readConversationTree(
  db: Db,
  conversationId: string,
  sort: ConversationSort = 'oldest',
): Promise<ConversationTree & { reportedReplyCount: number | undefined; version: string }> {
  const skeleton = await readConversationSkeleton(db, conversationId)
  return Object.assign(buildConversationTree(conversationId, skeleton.rows, sort), {
    reportedReplyCount: skeleton.reportedReplyCount,
    version: skeleton.version,
  })
}

/** What GET /2/conversations shows of one conversation (docs/api.md §5). */
export interface ConversationSummary {
  id: string
  post_count: number
  reply_count: number
  /** The root's reply_count and author, when the root is stored. */
  reported_reply_count: number | null
  root_author_id: string | null
  first_created_at: Date | null
  last_created_at: Date | null
  backfill_status: 'pending' | 'running' | 'done' | 'failed' | null
  backfill_source: 'recent' | 'all' | null
  backfill_error: string | null
}

/** Summaries of the given conversations in one statement; every id gets one (empty when unknown). */
export async function conversationSummaries(
  db: Db,
  conversationIds: readonly string[],
): Promise<ConversationSummary[]> {
  if (conversationIds.length === 0) return []
  return queryRows<ConversationSummary>(
    db,
    `SELECT x.id::text AS id, coalesce(c.post_count, 0) AS post_count,
       coalesce(c.reply_count, 0) AS reply_count,
       r.reply_count AS reported_reply_count, r.author_id::text AS root_author_id,
       c.first_created_at, c.last_created_at,
       b.status AS backfill_status, b.source AS backfill_source, b.error AS backfill_error
     FROM unnest($1::bigint[]) AS x(id)
     LEFT JOIN conversations c ON c.id = x.id
     LEFT JOIN posts r ON r.id = x.id
     LEFT JOIN backfills b ON b.conversation_id = x.id`,
    [conversationIds],
    { prepare: true },
  )
}
