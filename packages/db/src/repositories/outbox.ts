import { sql } from 'kysely'
import type { Db } from '../connect.js'
import type { OutboxPayload } from '../tables/index.js'

export interface RelayedPost {
  id: string
  conversation_id: string | null
  post: unknown
  author: unknown
}

export interface OutboxBatch {
  ids: string[]
  payloads: OutboxPayload[]
  posts: RelayedPost[]
}

/**
 * Claims up to `limit` outbox rows (SKIP LOCKED, so relays on several writers share the work),
 * hands them with their Posts to `publish`, and deletes them only once `publish` resolves. A crash
 * before the delete republishes the rows later: consumers of the stream tolerate repeats.
 * Returns how many rows were relayed.
 */
export async function relayOutbox(
  db: Db,
  limit: number,
  publish: (batch: OutboxBatch) => Promise<void>,
  { minAgeMs = 0 }: { minAgeMs?: number } = {},
): Promise<number> {
  return db.transaction().execute(async (trx) => {
    let query = trx.selectFrom('outbox').select(['id', 'payload'])
    // Rows younger than this are left to the writer that wrote them (it publishes from memory).
    if (minAgeMs > 0) {
      query = query.where(
        sql<boolean>`created_at < now() - make_interval(secs => ${minAgeMs / 1000})`,
      )
    }
    const rows = await query.orderBy('id').limit(limit).forUpdate().skipLocked().execute()
    if (rows.length === 0) return 0
    const postIds = rows.flatMap((r) => r.payload.post_ids)
    const posts =
      postIds.length === 0
        ? []
        : (
            await sql<RelayedPost>`
              SELECT p.id::text AS id, p.conversation_id::text AS conversation_id,
                     p.raw AS post, u.raw AS author
              FROM posts p LEFT JOIN users u ON u.id = p.author_id
              -- A Post withdrawn since it was stored is not published (docs/api.md §7).
              WHERE p.id = ANY(${postIds}::bigint[]) AND p.withdrawn IS NULL
              ORDER BY p.id`.execute(trx)
          ).rows
    await publish({ ids: rows.map((r) => r.id), payloads: rows.map((r) => r.payload), posts })
    await trx
      .deleteFrom('outbox')
      .where(
        'id',
        'in',
        rows.map((r) => r.id),
      )
      .execute()
    return rows.length
  })
}

/** Deletes outbox rows once their contents were published by the writer that wrote them. */
export async function deleteOutbox(db: Db, ids: readonly string[]): Promise<void> {
  if (ids.length === 0) return
  await db.deleteFrom('outbox').where('id', 'in', ids).execute()
}
