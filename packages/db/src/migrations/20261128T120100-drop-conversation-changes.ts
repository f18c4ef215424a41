import { sql, type Kysely } from 'kysely'

// A held tree is read again whole when its conversation's version moves (docs/api.md §5), so no
// read asks which transaction stored a Post any more: the column and its index go.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS posts_conversation_changes_idx`.execute(db)
  await sql`ALTER TABLE posts DROP COLUMN IF EXISTS stored_xid`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE posts ADD COLUMN IF NOT EXISTS stored_xid xid8`.execute(db)
  await sql`CREATE INDEX IF NOT EXISTS posts_conversation_changes_idx
    ON posts (conversation_id, stored_xid)`.execute(db)
}
