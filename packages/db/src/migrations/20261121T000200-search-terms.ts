import { sql, type Kysely } from 'kysely'

// The searchable terms of a Post, computed by the writer with @threadline/domain's tokenizer (not
// Postgres text search: the in-memory matcher must tokenise identically). One array holds every
// kind of term by prefix (words, #tags, @mentions, $cashtags, /url tokens, is:/has:/lang: flags),
// so one GIN index serves keywords, phrases (probe, then a contiguity recheck) and flags.
// @NOTE Posts stored before this migration keep an empty array until stored again.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`ALTER TABLE posts ADD COLUMN search_terms text[] NOT NULL DEFAULT '{}'`.execute(db)
  await sql`CREATE INDEX posts_search_terms_idx ON posts USING gin (search_terms)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP INDEX IF EXISTS posts_search_terms_idx`.execute(db)
  await sql`ALTER TABLE posts DROP COLUMN IF EXISTS search_terms`.execute(db)
}
