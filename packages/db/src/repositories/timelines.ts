import { sql, type RawBuilder } from 'kysely'
import { queryRows, type Db } from '../connect.js'
import { servedRaw, withdrawalColumns, type ReadPost } from './read-posts.js'

/** One page of Posts newest first by id, and the bounds X's timeline parameters set on it. */
export interface PostPageWindow {
  /** Exclusive lower id bound (`since_id`). */
  sinceId?: string
  /** Exclusive upper id bound (`until_id`). */
  untilId?: string
  /** Inclusive lower `created_at` bound. */
  startTime?: Date
  /** Exclusive upper `created_at` bound. */
  endTime?: Date
  /** The last id of the page before, going to older Posts (keyset: `next_token`). */
  beforeId?: string
  /** The first id of the page before, going to newer Posts (`previous_token`): read oldest first. */
  afterId?: string
  excludeReplies?: boolean
  excludeRetweets?: boolean
  limit: number
}

/** The columns the read API shapes Posts from (read-posts' ReadPost), qualified by `p`. */
export const PAGE_COLUMNS = sql.raw(
  'p.id::text AS id, p.text, p.created_at, p.conversation_id::text AS conversation_id, ' +
    'p.author_id::text AS author_id, p.in_reply_to_user_id::text AS in_reply_to_user_id, ' +
    `${servedRaw('p.')} AS raw, ${withdrawalColumns('p.')}`,
)

/** The window's conditions on `p` (the Post) and `key` (the column the page is ordered by). */
export function pageConditions(key: RawBuilder<unknown>, w: PostPageWindow): RawBuilder<unknown> {
  // A page never holds a withdrawn Post (docs/api.md §7).
  const parts: RawBuilder<unknown>[] = [sql`p.withdrawn IS NULL`]
  if (w.beforeId !== undefined) parts.push(sql`${key} < ${w.beforeId}::bigint`)
  if (w.afterId !== undefined) parts.push(sql`${key} > ${w.afterId}::bigint`)
  if (w.untilId !== undefined) parts.push(sql`${key} < ${w.untilId}::bigint`)
  if (w.sinceId !== undefined) parts.push(sql`${key} > ${w.sinceId}::bigint`)
  if (w.startTime !== undefined) parts.push(sql`p.created_at >= ${w.startTime}`)
  if (w.endTime !== undefined) parts.push(sql`p.created_at < ${w.endTime}`)
  if (w.excludeReplies) parts.push(sql`p.in_reply_to_post_id IS NULL`)
  if (w.excludeRetweets) {
    parts.push(sql`NOT EXISTS (SELECT 1 FROM post_references x
      WHERE x.post_id = p.id AND x.type = 'retweeted')`)
  }
  return sql.join(parts, sql` AND `)
}

/** The order a page is read in: newest first, or oldest first toward newer Posts (`afterId`). */
export function pageOrder(w: PostPageWindow): RawBuilder<unknown> {
  return sql.raw(w.afterId === undefined ? 'DESC' : 'ASC')
}

/**
 * Runs a page's statement as a named prepared one (its text depends only on which bounds are set)
 * and gives its Posts newest first; `more`: another page lies beyond it, in the direction read.
 */
export async function pageRows(
  db: Db,
  query: RawBuilder<ReadPost>,
  w: PostPageWindow,
): Promise<{ posts: ReadPost[]; more: boolean }> {
  const { sql: text, parameters } = query.compile(db)
  const rows = await queryRows<ReadPost>(db, text, parameters, { prepare: true })
  // One extra row says whether another page exists, so an empty page never carries a token.
  const more = rows.length > w.limit
  if (more) rows.length = w.limit
  if (w.afterId !== undefined) rows.reverse()
  return { posts: rows, more }
}

/**
 * A page of the Posts a user wrote, newest first: one range of posts_author_id_idx (the skeleton
 * of `GET /2/users/:id/tweets`, docs/api.md §2.8).
 */
export function userTimelinePage(
  db: Db,
  userId: string,
  w: PostPageWindow,
): Promise<{ posts: ReadPost[]; more: boolean }> {
  const query = sql<ReadPost>`
    SELECT ${PAGE_COLUMNS} FROM posts p
    WHERE p.author_id = ${userId}::bigint AND ${pageConditions(sql`p.id`, w)}
    ORDER BY p.id ${pageOrder(w)} LIMIT ${w.limit + 1}::int`
  return pageRows(db, query, w)
}

/**
 * A page of the Posts that mention a user, newest first: one range of post_mentions' key, each
 * Post then by its primary key (the skeleton of `GET /2/users/:id/mentions`, docs/api.md §2.8).
 */
export function userMentionsPage(
  db: Db,
  userId: string,
  w: PostPageWindow,
): Promise<{ posts: ReadPost[]; more: boolean }> {
  const query = sql<ReadPost>`
    SELECT ${PAGE_COLUMNS} FROM post_mentions m JOIN posts p ON p.id = m.post_id
    WHERE m.user_id = ${userId}::bigint AND ${pageConditions(sql`m.post_id`, w)}
    ORDER BY m.post_id ${pageOrder(w)} LIMIT ${w.limit + 1}::int`
  return pageRows(db, query, w)
}
