import { sql, type Kysely } from 'kysely'

// Every stored Post updates its conversation's counters. The index on last_created_at, which no
// query reads, made each of those updates a new index entry in two indexes (and bloat): without
// it no indexed column changes, so with free room on the page (fillfactor) the update is HOT, one
// new tuple version on the same page and no index work.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS conversations_last_created_at_idx`.execute(db)
  await sql`ALTER TABLE conversations SET (fillfactor = 70)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE conversations RESET (fillfactor)`.execute(db)
  await sql`CREATE INDEX IF NOT EXISTS conversations_last_created_at_idx
    ON conversations (last_created_at DESC)`.execute(db)
}
