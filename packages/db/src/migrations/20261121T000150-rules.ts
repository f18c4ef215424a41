import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE stream_rules (
      id bigint PRIMARY KEY,
      app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
      value text NOT NULL,
      tag text,
      created_at timestamptz NOT NULL DEFAULT now(),
      UNIQUE (app_id, value)
    )`.execute(db)
  await sql`CREATE INDEX stream_rules_value_idx ON stream_rules (value)`.execute(db)
  await sql`CREATE INDEX stream_rules_app_id_idx ON stream_rules (app_id, id DESC)`.execute(db)

  // The rules the ingest has placed upstream: one per distinct value over all apps.
  await sql`
    CREATE TABLE upstream_rules (
      value text PRIMARY KEY,
      upstream_id text,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'active', 'rejected')),
      reason text,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)

  // Backfill progress per conversation, so that a restart resumes instead of starting over.
  await sql`
    CREATE TABLE backfills (
      conversation_id bigint PRIMARY KEY,
      status text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'running', 'done', 'failed')),
      next_token text,
      pages integer NOT NULL DEFAULT 0,
      posts integer NOT NULL DEFAULT 0,
      root_fetched boolean NOT NULL DEFAULT false,
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of ['backfills', 'upstream_rules', 'stream_rules']) {
    await db.schema.dropTable(table).ifExists().execute()
  }
}
