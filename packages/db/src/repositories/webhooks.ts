import { sql } from 'kysely'
import { generateId } from '@threadline/domain'
import type { Db } from '../connect.js'
import type { Webhook, WebhookDelivery, WebhookFailure } from '../tables/index.js'

// --- registrations (docs/api.md §4.3) ---

/** Registers a webhook (its CRC check already passed); undefined when the app is at its cap. */
export async function createWebhook(
  db: Db,
  appId: string,
  url: string,
  { cap }: { cap: number },
): Promise<Webhook | undefined> {
  return db.transaction().execute(async (trx) => {
    await sql`SELECT pg_advisory_xact_lock(hashtext('webhooks'), hashtext(${appId}))`.execute(trx)
    const { count } = await trx
      .selectFrom('webhooks')
      .select((eb) => eb.fn.countAll<string>().as('count'))
      .where('app_id', '=', appId)
      .executeTakeFirstOrThrow()
    if (Number(count) >= cap) return undefined
    return trx
      .insertInto('webhooks')
      .values({ id: generateId(), app_id: appId, url })
      .returningAll()
      .executeTakeFirstOrThrow()
  })
}

export async function listWebhooks(db: Db, appId: string): Promise<Webhook[]> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('app_id', '=', appId)
    .orderBy('id', 'desc')
    .execute()
}

/** One of the app's webhooks; another app's id is simply not found. */
export async function findWebhook(db: Db, appId: string, id: string): Promise<Webhook | undefined> {
  return db
    .selectFrom('webhooks')
    .selectAll()
    .where('id', '=', id)
    .where('app_id', '=', appId)
    .executeTakeFirst()
}

/** Deletes one of the app's webhooks and the events still queued for it. */
export async function deleteWebhook(db: Db, appId: string, id: string): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const gone = await trx
      .deleteFrom('webhooks')
      .where('id', '=', id)
      .where('app_id', '=', appId)
      .returning('id')
      .executeTakeFirst()
    if (gone) await trx.deleteFrom('webhook_deliveries').where('webhook_id', '=', id).execute()
    return gone !== undefined
  })
}

/**
 * Records a CRC outcome. Success makes the webhook valid again; `maxFailures` consecutive failures
 * mark it invalid (a PUT that fails marks it invalid at once with `maxFailures: 1`).
 */
export async function recordCrc(
  db: Db,
  id: string,
  ok: boolean,
  { maxFailures }: { maxFailures: number },
): Promise<Webhook | undefined> {
  return db
    .updateTable('webhooks')
    .set(
      ok
        ? {
            valid: true,
            crc_failures: 0,
            crc_checked_at: sql`now()`,
            updated_at: sql`date_trunc('second', now())`,
          }
        : {
            crc_failures: sql`crc_failures + 1`,
            valid: sql`valid AND crc_failures + 1 < ${maxFailures}`,
            crc_checked_at: sql`now()`,
            updated_at: sql`date_trunc('second', now())`,
          },
    )
    .where('id', '=', id)
    .returningAll()
    .executeTakeFirst()
}

/**
 * Webhooks due for their periodic CRC check, claimed (crc_checked_at moved forward) so that several
 * delivery instances check each webhook once per interval.
 */
export async function claimCrcChecks(
  db: Db,
  intervalMs: number,
  limit: number,
): Promise<Array<Webhook & { consumer_secret: string }>> {
  const { rows } = await sql<Webhook & { consumer_secret: string }>`
    WITH due AS (
      SELECT id FROM webhooks
      WHERE crc_checked_at < now() - make_interval(secs => ${intervalMs / 1000})
      ORDER BY crc_checked_at LIMIT ${limit} FOR UPDATE SKIP LOCKED
    )
    UPDATE webhooks w SET crc_checked_at = now() FROM due, apps a
    WHERE w.id = due.id AND a.id = w.app_id
    RETURNING w.*, w.id::text AS id, w.app_id::text AS app_id, w.next_seq::text AS next_seq,
      a.consumer_secret`.execute(db)
  return rows
}

export async function appSecret(db: Db, appId: string): Promise<string | undefined> {
  const row = await db
    .selectFrom('apps')
    .select('consumer_secret')
    .where('id', '=', appId)
    .executeTakeFirst()
  return row?.consumer_secret
}

// --- delivery bookkeeping ---

/**
 * Keeps the source keys (a Post id, a user change) not seen before and records them, in the
 * caller's transaction: an activity job run twice fires its events once.
 */
export async function claimActivitySources(db: Db, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set()
  const { rows } = await sql<{ key: string }>`
    INSERT INTO activity_sources (key) SELECT unnest(${[...keys]}::text[])
    ON CONFLICT DO NOTHING RETURNING key`.execute(db)
  return new Set(rows.map((r) => r.key))
}

/** Forgets source keys older than `maxAgeMs` (the writer's outbox never repeats that late). */
export async function pruneActivitySources(db: Db, maxAgeMs: number): Promise<number> {
  const result = await db
    .deleteFrom('activity_sources')
    .where(sql<boolean>`created_at < now() - make_interval(secs => ${maxAgeMs / 1000})`)
    .executeTakeFirst()
  return Number(result.numDeletedRows)
}

export interface QueuedEvent {
  webhook_id: string
  event_uuid: string
  app_id: string
  subscription_id: string
  event_type: string
  body: string
}

/**
 * Appends events to their webhooks' queues, numbered per webhook in the given order. Bumping
 * `webhooks.next_seq` locks the webhook row until commit, so concurrent appends to one webhook get
 * disjoint, commit-ordered numbers. Events already queued (same event_uuid) and events of deleted
 * webhooks are dropped. Returns the webhooks that got events.
 */
export async function queueWebhookEvents(
  db: Db,
  events: readonly QueuedEvent[],
): Promise<string[]> {
  if (events.length === 0) return []
  const json = JSON.stringify(events.map((e, ord) => ({ ...e, ord })))
  const { rows } = await sql<{ webhook_id: string }>`
    WITH ev AS (
      SELECT * FROM jsonb_to_recordset(${json}::jsonb) AS x(
        webhook_id bigint, event_uuid bigint, app_id bigint, subscription_id bigint,
        event_type text, body text, ord integer)
    ),
    fresh AS (
      SELECT ev.* FROM ev
      WHERE NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_uuid = ev.event_uuid)
    ),
    counts AS (SELECT webhook_id, count(*) AS n FROM fresh GROUP BY webhook_id ORDER BY webhook_id),
    bump AS (
      UPDATE webhooks w SET next_seq = w.next_seq + c.n FROM counts c
      WHERE w.id = c.webhook_id
      RETURNING w.id, w.next_seq - c.n AS first_seq
    ),
    ins AS (
      INSERT INTO webhook_deliveries (webhook_id, seq, event_uuid, app_id, subscription_id, event_type, body)
      SELECT f.webhook_id,
        b.first_seq + row_number() OVER (PARTITION BY f.webhook_id ORDER BY f.ord) - 1,
        f.event_uuid, f.app_id, f.subscription_id, f.event_type, f.body
      FROM fresh f JOIN bump b ON b.id = f.webhook_id
      ON CONFLICT DO NOTHING
      RETURNING webhook_id
    )
    SELECT DISTINCT webhook_id::text AS webhook_id FROM ins`.execute(db)
  return rows.map((r) => r.webhook_id)
}

export interface ClaimedWebhook {
  id: string
  app_id: string
  url: string
  valid: boolean
  failures: number
  consumer_secret: string
}

/**
 * Takes the webhook's sending lease: succeeds only when no other sender holds it and no backoff is
 * pending. The holder is the single sender of the webhook until it releases or the lease lapses.
 */
export async function claimWebhook(
  db: Db,
  id: string,
  leaseMs: number,
): Promise<ClaimedWebhook | undefined> {
  const { rows } = await sql<ClaimedWebhook>`
    UPDATE webhooks w SET lease_until = now() + make_interval(secs => ${leaseMs / 1000})
    FROM apps a
    WHERE w.id = ${id} AND a.id = w.app_id
      AND (w.lease_until IS NULL OR w.lease_until < now())
      AND (w.retry_at IS NULL OR w.retry_at <= now())
    RETURNING w.id::text AS id, w.app_id::text AS app_id, w.url, w.valid, w.failures,
      a.consumer_secret`.execute(db)
  return rows[0]
}

/** Extends the lease; false when it was lost (lapsed and taken by another sender) or the webhook is gone. */
export async function renewWebhookLease(db: Db, id: string, leaseMs: number): Promise<boolean> {
  const result = await sql`
    UPDATE webhooks SET lease_until = now() + make_interval(secs => ${leaseMs / 1000})
    WHERE id = ${id} AND lease_until IS NOT NULL`.execute(db)
  return Number(result.numAffectedRows ?? 0) > 0
}

/** Gives the lease back, optionally with a backoff before the next attempt. */
export async function releaseWebhook(
  db: Db,
  id: string,
  backoff?: { retryAt: Date; error: string },
): Promise<void> {
  await db
    .updateTable('webhooks')
    .set(
      backoff
        ? {
            lease_until: null,
            retry_at: backoff.retryAt,
            failures: sql`failures + 1`,
            last_error: backoff.error,
          }
        : { lease_until: null },
    )
    .where('id', '=', id)
    .execute()
}

/** The oldest queued events of a webhook, in order. */
export async function headDeliveries(
  db: Db,
  webhookId: string,
  limit: number,
): Promise<WebhookDelivery[]> {
  return db
    .selectFrom('webhook_deliveries')
    .selectAll()
    .where('webhook_id', '=', webhookId)
    .orderBy('seq')
    .limit(limit)
    .execute()
}

/**
 * Deliveries succeeded: drop them and clear the webhook's failure count, in one statement (one
 * commit for a run of events, where a transaction per event cost a WAL flush each).
 */
export async function completeDeliveries(
  db: Db,
  webhookId: string,
  seqs: readonly string[],
): Promise<void> {
  if (seqs.length === 0) return
  await sql`
    WITH done AS (
      DELETE FROM webhook_deliveries
      WHERE webhook_id = ${webhookId} AND seq = ANY(${seqs}::bigint[])
    )
    UPDATE webhooks SET failures = 0, retry_at = NULL, last_error = NULL
    WHERE id = ${webhookId} AND failures > 0`.execute(db)
}

/** Counts a failed attempt on the head event; returns its attempts so far. */
export async function failDelivery(db: Db, webhookId: string, seq: string): Promise<number> {
  const row = await db
    .updateTable('webhook_deliveries')
    .set({ attempts: sql`attempts + 1` })
    .where('webhook_id', '=', webhookId)
    .where('seq', '=', seq)
    .returning('attempts')
    .executeTakeFirst()
  return row?.attempts ?? 0
}

/**
 * Parks every event queued for a webhook in webhook_failures (the receiver stayed down through the
 * whole retry schedule, so the events behind the head would fail the same way), and resets the
 * webhook's backoff for what comes next. Returns how many were parked.
 */
export async function parkWebhookEvents(
  db: Db,
  webhookId: string,
  reason: string,
  upToSeq?: string,
): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    WITH moved AS (
      DELETE FROM webhook_deliveries d
      WHERE d.webhook_id = ${webhookId} AND (${upToSeq ?? null}::bigint IS NULL OR d.seq <= ${upToSeq ?? null}::bigint)
      RETURNING d.*
    ),
    parked AS (
      INSERT INTO webhook_failures (webhook_id, app_id, subscription_id, event_uuid, event_type, url, body, attempts, reason)
      SELECT m.webhook_id, m.app_id, m.subscription_id, m.event_uuid, m.event_type,
        coalesce(w.url, ''), m.body, m.attempts, ${reason}
      FROM moved m LEFT JOIN webhooks w ON w.id = m.webhook_id
      ORDER BY m.seq
      RETURNING 1
    ),
    reset AS (
      UPDATE webhooks SET failures = 0, retry_at = NULL WHERE id = ${webhookId}
    )
    SELECT count(*)::text AS n FROM parked`.execute(db)
  return Number(rows[0]?.n ?? 0)
}

/** Webhooks with queued events, no sender and no pending backoff: the sweeper's work list. */
export async function dueWebhooks(db: Db, limit: number): Promise<string[]> {
  const { rows } = await sql<{ id: string }>`
    SELECT w.id::text AS id FROM webhooks w
    WHERE (w.lease_until IS NULL OR w.lease_until < now())
      AND (w.retry_at IS NULL OR w.retry_at <= now())
      AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id)
    ORDER BY w.id LIMIT ${limit}`.execute(db)
  return rows.map((r) => r.id)
}

// --- parked failures (threadline webhooks failures / replay) ---

export async function listWebhookFailures(
  db: Db,
  {
    appId,
    limit = 1000,
    includeReplayed = false,
  }: { appId?: string; limit?: number; includeReplayed?: boolean } = {},
): Promise<WebhookFailure[]> {
  let query = db.selectFrom('webhook_failures').selectAll()
  if (appId !== undefined) query = query.where('app_id', '=', appId)
  if (!includeReplayed) query = query.where('replayed_at', 'is', null)
  return query.orderBy('id').limit(limit).execute()
}

/**
 * Puts parked events back at the end of their webhooks' queues (same event_uuid and body) and marks
 * them replayed. Ids unknown, already replayed, or whose webhook is gone are returned as skipped.
 */
export async function replayWebhookFailures(
  db: Db,
  ids: readonly string[],
): Promise<{ replayed: string[]; skipped: string[]; webhooks: string[] }> {
  if (ids.length === 0) return { replayed: [], skipped: [], webhooks: [] }
  return db.transaction().execute(async (trx) => {
    const rows = await trx
      .selectFrom('webhook_failures as f')
      .innerJoin('webhooks as w', 'w.id', 'f.webhook_id')
      .selectAll('f')
      .where('f.id', 'in', [...ids])
      .where('f.replayed_at', 'is', null)
      .orderBy('f.id')
      .forUpdate()
      .execute()
    const webhooks = await queueWebhookEvents(
      trx,
      rows.map((r) => ({
        webhook_id: r.webhook_id,
        event_uuid: r.event_uuid,
        app_id: r.app_id,
        subscription_id: r.subscription_id,
        event_type: r.event_type,
        body: r.body,
      })),
    )
    const replayed = rows.map((r) => r.id)
    if (replayed.length > 0) {
      await trx
        .updateTable('webhook_failures')
        .set({ replayed_at: sql`now()` })
        .where('id', 'in', replayed)
        .execute()
    }
    const done = new Set(replayed)
    return { replayed, skipped: ids.filter((id) => !done.has(id)), webhooks }
  })
}
