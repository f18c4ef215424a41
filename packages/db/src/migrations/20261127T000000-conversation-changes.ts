import { sql, type Kysely } from 'kysely'

// A tree kept by a reader is brought up to date by the Posts changed since it was read
// (docs/api.md §5). `stored_xid` is the transaction that last stored or replaced a Post; the
// reader keeps the snapshot it read under, and the Posts changed since are those whose
// transaction that snapshot did not see. Transaction ids rather than a counter: a counter taken
// before commit can commit out of order and be missed; visibility cannot. Rows stored before
// this migration have none: every snapshot taken since sees them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE posts ADD COLUMN IF NOT EXISTS stored_xid xid8`.execute(db)
  await sql`CREATE INDEX IF NOT EXISTS posts_conversation_changes_idx
    ON posts (conversation_id, stored_xid)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS posts_conversation_changes_idx`.execute(db)
  await sql`ALTER TABLE posts DROP COLUMN IF EXISTS stored_xid`.execute(db)
}
