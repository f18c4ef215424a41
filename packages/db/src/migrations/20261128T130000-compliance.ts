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

  // The writer's statement stores a new Post of a withdrawn author hidden, as its snapshot shows
  // the author. An author withdrawn by a compliance transaction that commits while that statement
  // runs is not in its snapshot, and that transaction's update of the author's Posts does not see
  // the new Post. A trigger's query takes a fresh snapshot, at the statement's end: it hides them.
  // It first looks for such an author among the batch's (a primary-key probe each) and updates
  // nothing otherwise: an UPDATE joined to the batch is planned over every partition of `posts`,
  // which at 10 M Posts made each batch, and each COPY, several times slower (`bench growth`).
  await sql`
    CREATE FUNCTION posts_hide_withdrawn_authors() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
      hidden bigint[];
    BEGIN
      SELECT array_agg(s.id) INTO hidden
      FROM stored_posts s JOIN users u ON u.id = s.author_id
      WHERE u.withdrawn IS NOT NULL AND s.withdrawn IS NULL;
      IF hidden IS NULL THEN RETURN NULL; END IF;
      UPDATE posts p SET withdrawn = 'hidden', withdrawn_reason = u.withdrawn_reason,
        withdrawn_at = u.withdrawn_at
      FROM unnest(hidden) AS h(id), users u
      WHERE p.id = h.id AND u.id = p.author_id AND p.withdrawn IS NULL AND u.withdrawn IS NOT NULL;
      RETURN NULL;
    END $$`.execute(db)
  await sql`
    CREATE TRIGGER posts_withdrawn_authors_insert
    AFTER INSERT ON posts REFERENCING NEW TABLE AS stored_posts
    FOR EACH STATEMENT EXECUTE FUNCTION posts_hide_withdrawn_authors()`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TRIGGER IF EXISTS posts_withdrawn_authors_insert ON posts`.execute(db)
  await sql`DROP FUNCTION IF EXISTS posts_hide_withdrawn_authors()`.execute(db)
  await sql`DROP TABLE IF EXISTS compliance_log`.execute(db)
  for (const table of ['posts', 'users']) {
    await sql`
      ALTER TABLE ${sql.id(table)}
        DROP COLUMN IF EXISTS withdrawn, DROP COLUMN IF EXISTS withdrawn_reason,
        DROP COLUMN IF EXISTS withdrawn_at, DROP COLUMN IF EXISTS withheld_in_countries`.execute(db)
  }
}
