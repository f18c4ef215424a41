import {
  buildConversationTree,
  type ConversationSort,
  type ConversationTree,
  type SkeletonRows,
} from '@threadline/domain'
import { queryRows, type Db } from '../connect.js'

/** A conversation's skeleton as stored: its Posts' tree columns and the root's reported figure. */
export interface ConversationSkeleton {
  /** The conversation row's version when read ('0' when there is no row). */
  version: string
  rows: SkeletonRows
  /** The root's `public_metrics.reply_count` as last seen; undefined without a stored root. */
  reportedReplyCount: number | undefined
}

/**
 * The version in the same statement as the rows (one snapshot), so a skeleton is labelled with the
 * version of exactly what it holds. The rows come from posts_conversation_tree_idx alone (an
 * index-only scan once vacuum has marked the pages all-visible).
 */
const SKELETON = `
  SELECT coalesce((SELECT version FROM conversations WHERE id = $1), 0)::text AS version,
    (SELECT reply_count FROM posts WHERE id = $1) AS reported,
    p.id, p.in_reply_to_post_id AS parent, p.author_id AS author,
    date_part('epoch', p.created_at) * 1000 AS ms, coalesce(p.like_count, 0) AS likes
  FROM (SELECT 1) one
  LEFT JOIN posts p ON p.conversation_id = $1
  ORDER BY p.id`

type SkeletonRow = {
  version: string
  reported: number | null
  id: string | null
  parent: string | null
  author: string | null
  ms: number | null
  likes: number | null
}

/** Reads the skeleton of one conversation (docs/api.md §5) in one statement. */
export async function readConversationSkeleton(
  db: Db,
  conversationId: string,
): Promise<ConversationSkeleton> {
  const result = await queryRows<SkeletonRow>(db, SKELETON, [conversationId], { prepare: true })
  const first = result[0]!
  const n = first.id === null ? 0 : result.length
  const ids = new Array<string>(n)
  const parents = new Array<string | null>(n)
  const authors = new Array<string | null>(n)
  const createdMs = new Float64Array(n)
  const likes = new Int32Array(n)
  for (let i = 0; i < n; i++) {
    const row = result[i]!
    ids[i] = row.id!
    parents[i] = row.parent
    authors[i] = row.author
    createdMs[i] = row.ms!
    likes[i] = row.likes!
  }
  return {
    version: first.version,
    rows: { ids, parents, authors, createdMs, likes },
    reportedReplyCount: first.reported ?? undefined,
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
