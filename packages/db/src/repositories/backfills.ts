import { sql } from 'kysely'
import type { Db } from '../connect.js'
import type { Backfill } from '../tables/index.js'

/**
 * Creates a pending backfill for each conversation that has none (a conversation is backfilled
 * once, when its rule first appears) and returns those still to run (pending or running) among the
 * given ids, so that a caller can (re)enqueue them after a crash.
 */
export async function ensureBackfills(
  db: Db,
  conversationIds: readonly string[],
): Promise<Backfill[]> {
  if (conversationIds.length === 0) return []
  const ids = [...new Set(conversationIds)]
  await db
    .insertInto('backfills')
    .values(ids.map((id) => ({ conversation_id: id })))
    .onConflict((oc) => oc.column('conversation_id').doNothing())
    .execute()
  return db
    .selectFrom('backfills')
    .selectAll()
    .where('conversation_id', 'in', ids)
    .where('status', 'in', ['pending', 'running'])
    .orderBy('conversation_id')
    .execute()
}

export async function getBackfill(db: Db, conversationId: string): Promise<Backfill | undefined> {
  return db
    .selectFrom('backfills')
    .selectAll()
    .where('conversation_id', '=', conversationId)
    .executeTakeFirst()
}

export type BackfillUpdate =
  /** Started (again), with the search it uses. */
  | { kind: 'running'; source?: 'recent' | 'all' }
  | { kind: 'root'; posts: number }
  /** One page handed on: `nextToken` null means that was the last page. */
  | { kind: 'page'; nextToken: string | null; posts: number }
  | { kind: 'done' }
  | { kind: 'failed'; error: string }

/** Records backfill progress; each page moves next_token, so a restart resumes after it. */
export async function updateBackfill(
  db: Db,
  conversationId: string,
  update: BackfillUpdate,
): Promise<void> {
  let query = db
    .updateTable('backfills')
    .set({ updated_at: sql`now()` })
    .where('conversation_id', '=', conversationId)
  switch (update.kind) {
    case 'running':
      query = query.set({ status: 'running', error: null })
      if (update.source) query = query.set({ source: update.source })
      break
    case 'root':
      query = query.set((eb) => ({ root_fetched: true, posts: eb('posts', '+', update.posts) }))
      break
    case 'page':
      query = query.set((eb) => ({
        next_token: update.nextToken,
        pages: eb('pages', '+', 1),
        posts: eb('posts', '+', update.posts),
      }))
      break
    case 'done':
      query = query.set({ status: 'done', next_token: null, error: null })
      break
    case 'failed':
      query = query.set({ status: 'failed', error: update.error })
      break
  }
  await query.execute()
}
