import { sql, type Kysely } from 'kysely'

export async function up(db: Kysely<any>): Promise<void> {
  // Webhook registrations per app. `retry_at` and `lease_until` make delivery per webhook ordered
  // with a single sender at a time (see the webhooks repository); `next_seq` numbers its events.
  await sql`
    CREATE TABLE webhooks (
      id bigint PRIMARY KEY,
      app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
      url text NOT NULL,
      valid boolean NOT NULL DEFAULT true,
      crc_failures integer NOT NULL DEFAULT 0,
      crc_checked_at timestamptz NOT NULL DEFAULT now(),
      next_seq bigint NOT NULL DEFAULT 1,
      failures integer NOT NULL DEFAULT 0,
      retry_at timestamptz,
      lease_until timestamptz,
      last_error text,
      created_at timestamptz NOT NULL DEFAULT date_trunc('second', now()),
      updated_at timestamptz NOT NULL DEFAULT date_trunc('second', now())
    )`.execute(db)
  await sql`CREATE INDEX webhooks_app_id_idx ON webhooks (app_id, id DESC)`.execute(db)

  // filter_user_id / filter_keyword are the two filter members; webhook_id is kept (no foreign key)
  // when its webhook is deleted, so listing can tell the app its subscription lost its target.
  await sql`
    CREATE TABLE activity_subscriptions (
      id bigint PRIMARY KEY,
      app_id bigint NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
      event_type text NOT NULL,
      filter_user_id bigint,
      filter_keyword text,
      tag text,
      webhook_id bigint,
      created_at timestamptz NOT NULL DEFAULT date_trunc('second', now()),
      updated_at timestamptz NOT NULL DEFAULT date_trunc('second', now()),
      CHECK (filter_user_id IS NOT NULL OR filter_keyword IS NOT NULL)
    )`.execute(db)
  // An identical subscription (same event type, filter and webhook) exists once per app.
  await sql`
    CREATE UNIQUE INDEX activity_subscriptions_identity_idx ON activity_subscriptions (
      app_id, event_type, coalesce(filter_user_id, -1), coalesce(filter_keyword, ''),
      coalesce(webhook_id, -1))`.execute(db)
  // Matching: events look subscriptions up by event type and user id.
  await sql`CREATE INDEX activity_subscriptions_match_idx ON activity_subscriptions (event_type, filter_user_id)`.execute(
    db,
  )
  await sql`CREATE INDEX activity_subscriptions_app_id_idx ON activity_subscriptions (app_id, id DESC)`.execute(
    db,
  )
  await sql`CREATE INDEX activity_subscriptions_webhook_id_idx ON activity_subscriptions (webhook_id) WHERE webhook_id IS NOT NULL`.execute(
    db,
  )

  // What the delivery service already turned into events (a repeated activity job fires nothing).
  await sql`
    CREATE TABLE activity_sources (
      key text PRIMARY KEY,
      created_at timestamptz NOT NULL DEFAULT now()
    )`.execute(db)
  await sql`CREATE INDEX activity_sources_created_at_idx ON activity_sources (created_at)`.execute(
    db,
  )

  // Events waiting for their webhook, in per-webhook order (seq).
  await sql`
    CREATE TABLE webhook_deliveries (
      webhook_id bigint NOT NULL,
      seq bigint NOT NULL,
      event_uuid bigint NOT NULL UNIQUE,
      app_id bigint NOT NULL,
      subscription_id bigint NOT NULL,
      event_type text NOT NULL,
      body text NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      PRIMARY KEY (webhook_id, seq)
    )`.execute(db)

  // Deliveries given up on, for an operator to list and replay.
  await sql`
    CREATE TABLE webhook_failures (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      webhook_id bigint NOT NULL,
      app_id bigint NOT NULL,
      subscription_id bigint NOT NULL,
      event_uuid bigint NOT NULL,
      event_type text NOT NULL,
      url text NOT NULL,
      body text NOT NULL,
      attempts integer NOT NULL,
      reason text NOT NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      replayed_at timestamptz
    )`.execute(db)
  await sql`CREATE INDEX webhook_failures_app_id_idx ON webhook_failures (app_id, id)`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'webhook_failures',
    'webhook_deliveries',
    'activity_sources',
    'activity_subscriptions',
    'webhooks',
  ]) {
    await db.schema.dropTable(table).ifExists().execute()
  }
}
