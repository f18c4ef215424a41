import {
  buildConversationTree,
  type ConversationSort,
  type ConversationTree,
  type SkeletonRows,
} from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'

/** A conversation's skeleton as stored: its Posts' tree columns and the root's reported figure. */
export interface ConversationSkeleton {
  /** The conversation row's version when read ('0' when nothing is stored). */
  version: string
  rows: SkeletonRows
  /** The root's `public_metrics.reply_count` as last seen; undefined without a stored root. */
  reportedReplyCount: number | undefined
}

/**
 * Every Post of a conversation as one row, from posts_conversation_tree_idx alone (an index-only
 * scan once vacuum has marked the pages all-visible): each tree column as one comma-joined text
 * (element i of each is Post i: one aggregate node feeds them the same rows), so that the client
 * parses five strings rather than a row object per Post. The version is read in the same
 * statement, so a skeleton is labelled with exactly what it holds. `id >= $1`: a reply is newer
 * than its root, so only the partitions since the root are read.
 */
const SKELETON = `
  SELECT (SELECT version::text FROM conversations WHERE id = $1) AS version,
    (SELECT reply_count FROM posts WHERE id = $1) AS reported, count(*)::int AS n,
    string_agg(id::text, ',') AS ids,
    string_agg(coalesce(in_reply_to_post_id::text, ''), ',') AS parents,
    string_agg(coalesce(author_id::text, ''), ',') AS authors,
    string_agg(((date_part('epoch', created_at) * 1000)::bigint)::text, ',') AS ms,
    string_agg(coalesce(like_count, 0)::text, ',') AS likes
  FROM posts WHERE conversation_id = $1 AND id >= $1`

type SkeletonRow = {
  version: string | null
  reported: number | null
  n: number
  ids: string | null
  parents: string | null
  authors: string | null
  ms: string | null
  likes: string | null
}

const orNull = (value: string) => (value === '' ? null : value)

/** Reads the skeleton of one conversation (docs/api.md §5) in one statement. */
export async function readConversationSkeleton(
  db: Db,
  conversationId: string,
): Promise<ConversationSkeleton> {
  const [head] = await queryRows<SkeletonRow>(db, SKELETON, [conversationId], { prepare: true })
  const split = (text: string | null) => (!head!.n || text === null ? [] : text.split(','))
  return {
    version: head!.version ?? '0',
    rows: {
      ids: split(head!.ids),
      parents: split(head!.parents).map(orNull),
      authors: split(head!.authors).map(orNull),
      createdMs: Float64Array.from(split(head!.ms), Number),
      likes: Int32Array.from(split(head!.likes), Number),
    },
    reportedReplyCount: head!.reported ?? undefined,
  }
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

/**
 * A conversation as a tree, read and built in one go (no caching: the API holds built trees, see
 * its conversations routes). For exports and tools that walk a whole tree.
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
       r.reply_count AS reported_reply_count,
       CASE WHEN r.withdrawn IS NULL THEN r.author_id::text END AS root_author_id,
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
