import { sql, type Kysely } from 'kysely'

// A reject is kept once per batch (docs/architecture.md, the write path): a `posts` job retried
// after its batch committed must not keep its malformed lines a second time. Rows from before
// this migration, and rejects stored without a batch, have none and never conflict.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE ingest_rejects ADD COLUMN IF NOT EXISTS batch_id text`.execute(db)
  await sql`CREATE UNIQUE INDEX IF NOT EXISTS ingest_rejects_batch_idx
    ON ingest_rejects (batch_id, md5(reason), md5(raw))`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS ingest_rejects_batch_idx`.execute(db)
  await sql`ALTER TABLE ingest_rejects DROP COLUMN IF EXISTS batch_id`.execute(db)
}
