import { sql, type Kysely } from 'kysely'

// Migrations take Kysely<any> and never import application code: they must keep working as the
// code moves on.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE posts (
      id bigint PRIMARY KEY,
      conversation_id bigint,
      author_id bigint,
      in_reply_to_user_id bigint,
      in_reply_to_post_id bigint,
      text text NOT NULL,
      created_at timestamptz(3) NOT NULL,
      lang text,
      retweet_count integer,
      reply_count integer,
      like_count integer,
      quote_count integer,
      bookmark_count integer,
      impression_count bigint,
      raw jsonb NOT NULL,
      observed_at timestamptz NOT NULL,
      stored_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`CREATE INDEX posts_conversation_id_idx ON posts (conversation_id, id DESC)`.execute(db)
  await sql`CREATE INDEX posts_author_id_idx ON posts (author_id, id DESC)`.execute(db)
  await sql`CREATE INDEX posts_created_at_idx ON posts (created_at)`.execute(db)
  await sql`CREATE INDEX posts_in_reply_to_post_id_idx ON posts (in_reply_to_post_id) WHERE in_reply_to_post_id IS NOT NULL`.execute(
    db,
  )
  await sql`CREATE INDEX posts_in_reply_to_user_id_idx ON posts (in_reply_to_user_id, id DESC) WHERE in_reply_to_user_id IS NOT NULL`.execute(
    db,
  )

  await sql`
    CREATE TABLE post_references (
      post_id bigint NOT NULL,
      type text NOT NULL CHECK (type IN ('replied_to', 'quoted', 'retweeted')),
      referenced_id bigint NOT NULL,
      PRIMARY KEY (post_id, type, referenced_id)
    )`.execute(db)
  await sql`CREATE INDEX post_references_referenced_idx ON post_references (referenced_id, type)`.execute(
    db,
  )

  await sql`
    CREATE TABLE users (
      id bigint PRIMARY KEY,
      name text NOT NULL,
      username text NOT NULL,
      raw jsonb NOT NULL,
      observed_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`CREATE INDEX users_username_idx ON users (lower(username))`.execute(db)

  await sql`
    CREATE TABLE conversations (
      id bigint PRIMARY KEY,
      root_post_id bigint,
      post_count integer NOT NULL DEFAULT 0,
      reply_count integer NOT NULL DEFAULT 0,
      first_created_at timestamptz(3) NOT NULL,
      last_created_at timestamptz(3) NOT NULL,
      updated_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`CREATE INDEX conversations_last_created_at_idx ON conversations (last_created_at DESC)`.execute(
    db,
  )

  await sql`
    CREATE TABLE apps (
      id bigint PRIMARY KEY,
      name text NOT NULL,
      consumer_secret text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`
    CREATE TABLE api_tokens (
      id bigint PRIMARY KEY,
      app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
      token_hash bytea NOT NULL UNIQUE,
      created_at timestamptz NOT NULL DEFAULT now(),
      revoked_at timestamptz
    )`.execute(db)
  await sql`CREATE INDEX api_tokens_app_id_idx ON api_tokens (app_id)`.execute(db)

  await sql`
    CREATE TABLE ingest_rejects (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      source text NOT NULL,
      reason text NOT NULL,
      raw text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`
    CREATE TABLE outbox (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      payload jsonb NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'outbox',
    'ingest_rejects',
    'api_tokens',
    'apps',
    'conversations',
    'users',
    'post_references',
    'posts',
  ]) {
    await db.schema.dropTable(table).ifExists().execute()
  }
}
