import { sql } from 'kysely'
import type { Db } from '../connect.js'
import type { ReadPost } from './read-posts.js'
import {
  PAGE_COLUMNS,
  pageConditions,
  pageOrder,
  pageRows,
  type PostPageWindow,
} from './timelines.js'

/**
 * A page of the stored Posts that quote `postId` (a `quoted` reference, as the query operator
 * `quotes_of_tweet_id:` reads it), newest first: one range of post_references_quoted_idx, each
 * Post then by its primary key (the skeleton of `GET /2/tweets/:id/quote_tweets`, docs/api.md §2.9).
 */
export function quotesPage(
  db: Db,
  postId: string,
  w: PostPageWindow,
): Promise<{ posts: ReadPost[]; more: boolean }> {
  const query = sql<ReadPost>`
    SELECT ${PAGE_COLUMNS} FROM post_references r JOIN posts p ON p.id = r.post_id
    WHERE r.referenced_id = ${postId}::bigint AND r.type = 'quoted'
      AND ${pageConditions(sql`r.post_id`, w)}
    ORDER BY r.post_id ${pageOrder(w)} LIMIT ${w.limit + 1}::int`
  return pageRows(db, query, w)
}
