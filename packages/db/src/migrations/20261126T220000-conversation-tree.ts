import { sql, type Kysely } from 'kysely'

// The conversation tree (docs/api.md §5) is derived at read time from one index: a conversation's
// Posts with everything the tree needs (parent, author, time, likes) in the index itself, so the
// skeleton of any size of tree is an index-only range scan. Keyed (conversation_id, id), it also
// serves what the older (conversation_id, id DESC) index served (a scan runs either way), which
// goes: one index per stored Post, not two.
//
// `version` grows in the writer's transaction whenever a Post of the conversation is stored or
// replaced, so a reader can keep a tree built at one version until the next. No indexed column of
// conversations changes with it, so the counter update stays HOT.
//
// A backfill records the search it uses (`recent` or `all`), shown by GET /2/conversations.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`CREATE INDEX IF NOT EXISTS posts_conversation_tree_idx ON posts (conversation_id, id)
    INCLUDE (in_reply_to_post_id, author_id, created_at, like_count)`.execute(db)
  await sql`DROP INDEX IF EXISTS posts_conversation_id_idx`.execute(db)
  await sql`ALTER TABLE conversations ADD COLUMN IF NOT EXISTS version bigint NOT NULL DEFAULT 0`.execute(
    db,
  )
  await sql`ALTER TABLE backfills ADD COLUMN IF NOT EXISTS source text
    CHECK (source IN ('recent', 'all'))`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE backfills DROP COLUMN IF EXISTS source`.execute(db)
  await sql`ALTER TABLE conversations DROP COLUMN IF EXISTS version`.execute(db)
  await sql`CREATE INDEX IF NOT EXISTS posts_conversation_id_idx ON posts (conversation_id, id DESC)`.execute(
    db,
  )
  await sql`DROP INDEX IF EXISTS posts_conversation_tree_idx`.execute(db)
}
