import { sql, type Kysely } from 'kysely'

// What X withdraws (docs/api.md §7): the state of each stored Post and user, and the log of every
// compliance event applied, once each. A withdrawn Post keeps its row: a deleted one as a
// placeholder (id, conversation, parent, time), a hidden one with its content, unserved.
export async function up(db: Kysely<any>): Promise<void> {
  for (const table of ['posts', 'users']) {
    // ADD COLUMN with no default is a catalog change only, on every partition of posts.
    await sql`
      ALTER TABLE ${sql.id(table)}
        ADD COLUMN withdrawn text NULL CHECK (withdrawn IN ('deleted', 'hidden')),
        ADD COLUMN withdrawn_reason text NULL,
        ADD COLUMN withdrawn_at timestamptz NULL,
        ADD COLUMN withheld_in_countries text[] NULL`.execute(db)
  }
  await sql`
    CREATE TABLE compliance_log (
      seq bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      kind text NOT NULL CHECK (kind IN ('tweet', 'user')),
      target_id bigint NOT NULL,
      author_id bigint NULL,
      action text NOT NULL,
      reason text NULL,
      detail jsonb NULL,
      event_at timestamptz NOT NULL,
      received_at timestamptz NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now(),
      source text NOT NULL CHECK (source IN ('stream', 'job', 'import')),
      UNIQUE (kind, target_id, action, event_at)
    )`.execute(db)
  await sql`CREATE INDEX compliance_log_event_at_idx ON compliance_log (event_at)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS compliance_log`.execute(db)
  for (const table of ['posts', 'users']) {
    await sql`
      ALTER TABLE ${sql.id(table)}
        DROP COLUMN IF EXISTS withdrawn, DROP COLUMN IF EXISTS withdrawn_reason,
        DROP COLUMN IF EXISTS withdrawn_at, DROP COLUMN IF EXISTS withheld_in_countries`.execute(db)
  }
}
