import { sql } from 'kysely'
import { generateId, type MatchableSubscription } from '@threadline/domain'
import type { Db } from '../connect.js'
import type { ActivitySubscription } from '../tables/index.js'

export interface SubscriptionInput {
  event_type: string
  user_id?: string
  keyword?: string
  tag?: string
  webhook_id?: string
}

/** A subscription with what listing must say about its webhook. */
export interface ListedSubscription extends ActivitySubscription {
  /** null: no webhook; otherwise whether the webhook still exists and is valid. */
  webhook_state: 'valid' | 'invalid' | 'missing' | null
}

export type CreateSubscriptionResult =
  | { kind: 'created'; subscription: ActivitySubscription; total: number }
  | { kind: 'conflict'; existing: ActivitySubscription }
  | { kind: 'cap_exceeded'; total: number }
  | { kind: 'webhook_not_found' }

const lockApp = (appId: string) =>
  sql`SELECT pg_advisory_xact_lock(hashtext('activity_subscriptions'), hashtext(${appId}))`

export async function countSubscriptions(db: Db, appId: string): Promise<number> {
  const { count } = await db
    .selectFrom('activity_subscriptions')
    .select((eb) => eb.fn.countAll<string>().as('count'))
    .where('app_id', '=', appId)
    .executeTakeFirstOrThrow()
  return Number(count)
}

/**
 * Creates a subscription for an app, at most `cap` per app. Serialised per app (advisory lock) so
 * that concurrent creates cannot pass the cap together; an identical subscription (same event type,
 * filter and webhook) is reported, never created twice. A webhook of another app is "not found".
 */
export async function createSubscription(
  db: Db,
  appId: string,
  input: SubscriptionInput,
  { cap }: { cap: number },
): Promise<CreateSubscriptionResult> {
  return db.transaction().execute(async (trx) => {
    await lockApp(appId).execute(trx)
    if (input.webhook_id !== undefined) {
      const hook = await trx
        .selectFrom('webhooks')
        .select('id')
        .where('id', '=', input.webhook_id)
        .where('app_id', '=', appId)
        .executeTakeFirst()
      if (!hook) return { kind: 'webhook_not_found' }
    }
    const existing = await trx
      .selectFrom('activity_subscriptions')
      .selectAll()
      .where('app_id', '=', appId)
      .where('event_type', '=', input.event_type)
      .where(sql<boolean>`filter_user_id IS NOT DISTINCT FROM ${input.user_id ?? null}::bigint`)
      .where(sql<boolean>`filter_keyword IS NOT DISTINCT FROM ${input.keyword ?? null}::text`)
      .where(sql<boolean>`webhook_id IS NOT DISTINCT FROM ${input.webhook_id ?? null}::bigint`)
      .executeTakeFirst()
    if (existing) return { kind: 'conflict', existing }
    const total = await countSubscriptions(trx as unknown as Db, appId)
    if (total >= cap) return { kind: 'cap_exceeded', total }
    const subscription = await trx
      .insertInto('activity_subscriptions')
      .values({
        id: generateId(),
        app_id: appId,
        event_type: input.event_type,
        filter_user_id: input.user_id ?? null,
        filter_keyword: input.keyword ?? null,
        tag: input.tag ?? null,
        webhook_id: input.webhook_id ?? null,
      })
      .returningAll()
      .executeTakeFirstOrThrow()
    return { kind: 'created', subscription, total: total + 1 }
  })
}

/** An app's subscriptions, newest first, keyset-paginated by id, with their webhooks' state. */
export async function listSubscriptions(
  db: Db,
  appId: string,
  { limit, beforeId }: { limit: number; beforeId?: string },
): Promise<ListedSubscription[]> {
  let query = db
    .selectFrom('activity_subscriptions as s')
    .leftJoin('webhooks as w', (join) =>
      join.onRef('w.id', '=', 's.webhook_id').onRef('w.app_id', '=', 's.app_id'),
    )
    .selectAll('s')
    .select(
      sql<ListedSubscription['webhook_state']>`CASE
        WHEN s.webhook_id IS NULL THEN NULL
        WHEN w.id IS NULL THEN 'missing'
        WHEN w.valid THEN 'valid' ELSE 'invalid' END`.as('webhook_state'),
    )
    .where('s.app_id', '=', appId)
  if (beforeId !== undefined) query = query.where('s.id', '<', beforeId)
  return query.orderBy('s.id', 'desc').limit(limit).execute()
}

export type UpdateSubscriptionResult =
  | { kind: 'updated'; subscription: ActivitySubscription; total: number }
  | { kind: 'not_found' }
  | { kind: 'webhook_not_found' }
  | { kind: 'conflict'; existing: ActivitySubscription }

/** Changes a subscription's tag and/or webhook; another app's id is "not found". */
export async function updateSubscription(
  db: Db,
  appId: string,
  id: string,
  change: { tag?: string; webhook_id?: string },
): Promise<UpdateSubscriptionResult> {
  return db.transaction().execute(async (trx) => {
    await lockApp(appId).execute(trx)
    const current = await trx
      .selectFrom('activity_subscriptions')
      .selectAll()
      .where('id', '=', id)
      .where('app_id', '=', appId)
      .executeTakeFirst()
    if (!current) return { kind: 'not_found' }
    if (change.webhook_id !== undefined) {
      const hook = await trx
        .selectFrom('webhooks')
        .select('id')
        .where('id', '=', change.webhook_id)
        .where('app_id', '=', appId)
        .executeTakeFirst()
      if (!hook) return { kind: 'webhook_not_found' }
      const clash = await trx
        .selectFrom('activity_subscriptions')
        .selectAll()
        .where('app_id', '=', appId)
        .where('id', '<>', id)
        .where('event_type', '=', current.event_type)
        .where(sql<boolean>`filter_user_id IS NOT DISTINCT FROM ${current.filter_user_id}::bigint`)
        .where(sql<boolean>`filter_keyword IS NOT DISTINCT FROM ${current.filter_keyword}::text`)
        .where('webhook_id', '=', change.webhook_id)
        .executeTakeFirst()
      if (clash) return { kind: 'conflict', existing: clash }
    }
    const subscription = await trx
      .updateTable('activity_subscriptions')
      .set({
        ...(change.tag !== undefined ? { tag: change.tag } : {}),
        ...(change.webhook_id !== undefined ? { webhook_id: change.webhook_id } : {}),
        updated_at: sql`date_trunc('second', now())`,
      })
      .where('id', '=', id)
      .returningAll()
      .executeTakeFirstOrThrow()
    return {
      kind: 'updated',
      subscription,
      total: await countSubscriptions(trx as unknown as Db, appId),
    }
  })
}

/** Deletes one of the app's subscriptions; undefined when the app has no such id. */
export async function deleteSubscription(
  db: Db,
  appId: string,
  id: string,
): Promise<{ total: number } | undefined> {
  return db.transaction().execute(async (trx) => {
    await lockApp(appId).execute(trx)
    const gone = await trx
      .deleteFrom('activity_subscriptions')
      .where('id', '=', id)
      .where('app_id', '=', appId)
      .returning('id')
      .executeTakeFirst()
    if (!gone) return undefined
    return { total: await countSubscriptions(trx as unknown as Db, appId) }
  })
}

/**
 * The subscriptions that may match a set of candidate events: those whose (event_type, user id)
 * is among `keys` (an index probe each), plus every keyword-only Post subscription (its
 * keyword is checked by the caller). One statement whatever the number of keys.
 */
export async function candidateSubscriptions(
  db: Db,
  keys: ReadonlyArray<{ event_type: string; user_id: string }>,
): Promise<MatchableSubscription[]> {
  const types = keys.map((k) => k.event_type)
  const users = keys.map((k) => k.user_id)
  const { rows } = await sql<MatchableSubscription>`
    SELECT s.id::text AS id, s.app_id::text AS app_id, s.event_type,
           s.filter_user_id::text AS filter_user_id, s.filter_keyword, s.tag,
           s.webhook_id::text AS webhook_id
    FROM activity_subscriptions s
    JOIN (SELECT DISTINCT * FROM unnest(${types}::text[], ${users}::bigint[]) AS k(event_type, user_id)) k
      ON s.event_type = k.event_type AND s.filter_user_id = k.user_id
    UNION ALL
    SELECT s.id::text, s.app_id::text, s.event_type, NULL, s.filter_keyword, s.tag, s.webhook_id::text
    FROM activity_subscriptions s
    WHERE s.filter_user_id IS NULL AND s.event_type LIKE 'post.%'`.execute(db)
  return rows
}

/** A new Post as event derivation needs it: who it replies to, quotes and mentions. */
export interface ActivityPost {
  id: string
  author_id: string | null
  in_reply_to_user_id: string | null
  text: string
  raw: unknown
  quoted_author_ids: string[]
  mentioned_user_ids: string[]
}

/**
 * The Posts of an activity job in one statement: quoted authors through post_references, mentioned
 * users from the Post's entities (by id, or by username through the users index when the upstream
 * gave no id).
 */
export async function activityPosts(db: Db, ids: readonly string[]): Promise<ActivityPost[]> {
  if (ids.length === 0) return []
  const { rows } = await sql<ActivityPost>`
    SELECT p.id::text AS id, p.author_id::text AS author_id,
      p.in_reply_to_user_id::text AS in_reply_to_user_id, p.text, p.raw,
      coalesce((
        SELECT array_agg(DISTINCT q.author_id::text)
        FROM post_references r JOIN posts q ON q.id = r.referenced_id
        WHERE r.post_id = p.id AND r.type = 'quoted' AND q.author_id IS NOT NULL
      ), '{}') AS quoted_author_ids,
      coalesce((
        SELECT array_agg(DISTINCT coalesce(m->>'id', u.id::text))
        FROM jsonb_array_elements(
          CASE WHEN jsonb_typeof(p.raw->'entities'->'mentions') = 'array'
            THEN p.raw->'entities'->'mentions' ELSE '[]'::jsonb END) m
        LEFT JOIN users u ON m->>'id' IS NULL AND lower(u.username) = lower(m->>'username')
        WHERE coalesce(m->>'id', u.id::text) ~ '^[0-9]{1,19}$'
      ), '{}') AS mentioned_user_ids
    -- A Post withdrawn since it was stored is no activity (docs/api.md §7).
    FROM posts p WHERE p.id = ANY(${[...ids]}::bigint[]) AND p.withdrawn IS NULL
    ORDER BY p.id`.execute(db)
  return rows
}
