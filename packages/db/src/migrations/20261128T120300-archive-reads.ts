import { sql, type Kysely } from 'kysely'

// The archive reads (docs/api.md §2.8–2.9): a user's mentions and a Post's quotes, newest first,
// each page one index range scan.
//
// Mentions are kept in their own table, filled in the transaction of every statement that stores
// or replaces Posts: a statement-level trigger reads the rows it stored (a transition table), so
// the writer's statement needs no change and a batch still costs one round trip. Mentions are
// only ever added: a copy without entities (an included one) never removes them.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE post_mentions (
      user_id bigint NOT NULL,
      post_id bigint NOT NULL,
      PRIMARY KEY (user_id, post_id)
    )`.execute(db)

  // Ids that fit a bigint only: a malformed entity never fails the writer's statement.
  await sql`
    CREATE FUNCTION post_mention_rows(doc jsonb, pid bigint)
    RETURNS TABLE (user_id bigint, post_id bigint) LANGUAGE sql IMMUTABLE AS $$
      SELECT DISTINCT (m->>'id')::bigint, pid
      FROM jsonb_array_elements(CASE WHEN jsonb_typeof(doc->'entities'->'mentions') = 'array'
        THEN doc->'entities'->'mentions' ELSE '[]'::jsonb END) AS m
      WHERE m->>'id' ~ '^[0-9]{1,19}$'
        AND (length(m->>'id') < 19 OR m->>'id' <= '9223372036854775807')
    $$`.execute(db)
  await sql`
    CREATE FUNCTION posts_store_mentions() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      INSERT INTO post_mentions (user_id, post_id)
      SELECT m.user_id, m.post_id
      FROM stored_posts s CROSS JOIN LATERAL post_mention_rows(s.raw, s.id) AS m
      WHERE s.raw->'entities' ? 'mentions'
      ORDER BY 1, 2
      ON CONFLICT DO NOTHING;
      RETURN NULL;
    END $$`.execute(db)
  // One trigger per event: a trigger with a transition table takes one event only.
  for (const event of ['INSERT', 'UPDATE']) {
    await sql`
      CREATE TRIGGER ${sql.raw(`posts_mentions_${event.toLowerCase()}`)}
      AFTER ${sql.raw(event)} ON posts REFERENCING NEW TABLE AS stored_posts
      FOR EACH STATEMENT EXECUTE FUNCTION posts_store_mentions()`.execute(db)
  }
  await sql`
    INSERT INTO post_mentions (user_id, post_id)
    SELECT m.user_id, m.post_id
    FROM posts p CROSS JOIN LATERAL post_mention_rows(p.raw, p.id) AS m
    WHERE p.raw->'entities' ? 'mentions'
    ON CONFLICT DO NOTHING`.execute(db)

  // Quotes of one Post, newest first.
  await sql`CREATE INDEX post_references_quoted_idx
    ON post_references (referenced_id, post_id DESC) WHERE type = 'quoted'`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS post_references_quoted_idx`.execute(db)
  await sql`DROP TRIGGER IF EXISTS posts_mentions_insert ON posts`.execute(db)
  await sql`DROP TRIGGER IF EXISTS posts_mentions_update ON posts`.execute(db)
  await sql`DROP FUNCTION IF EXISTS posts_store_mentions()`.execute(db)
  await sql`DROP FUNCTION IF EXISTS post_mention_rows(jsonb, bigint)`.execute(db)
  await sql`DROP TABLE IF EXISTS post_mentions`.execute(db)
}
