import { sql } from 'kysely'
import { generateId } from '@threadline/domain'
import type { Db } from '../connect.js'
import type { StreamRule } from '../tables/index.js'

/** Postgres channel notified (in the changing transaction) whenever any app's rules change. */
export const RULES_CHANNEL = 'threadline_rules'

export interface RuleInput {
  value: string
  tag?: string | null
}

export interface AddRulesResult {
  created: StreamRule[]
  /** Values the app already has (or that repeat within the request), with the existing id. */
  duplicates: Array<{ value: string; id: string }>
  /** True when the app's cap would be passed: then nothing was created. */
  capExceeded: boolean
}

class DryRunRollback extends Error {
  constructor(readonly result: AddRulesResult) {
    super('dry run')
  }
}

/**
 * Adds rules to an app, at most `cap` in all. Values the app already holds are reported as
 * duplicates, never created twice. With `dryRun`, the same work runs and is rolled back, so the
 * answer is exactly what a real call would have done. Serialised per app (advisory lock) so that
 * two concurrent calls cannot pass the cap together.
 */
export async function addRules(
  db: Db,
  appId: string,
  rules: readonly RuleInput[],
  { cap, dryRun = false }: { cap: number; dryRun?: boolean },
): Promise<AddRulesResult> {
  try {
    return await db.transaction().execute(async (trx) => {
      await sql`SELECT pg_advisory_xact_lock(hashtext('stream_rules'), hashtext(${appId}))`.execute(
        trx,
      )
      const values = [...new Set(rules.map((r) => r.value))]
      const existing = values.length
        ? await trx
            .selectFrom('stream_rules')
            .select(['id', 'value'])
            .where('app_id', '=', appId)
            .where('value', '=', sql<string>`any(${values}::text[])`)
            .execute()
        : []
      const existingIds = new Map(existing.map((r) => [r.value, r.id]))
      const duplicates: AddRulesResult['duplicates'] = []
      const fresh: Array<{ id: string; app_id: string; value: string; tag: string | null }> = []
      const seen = new Map<string, string>()
      for (const rule of rules) {
        const id = existingIds.get(rule.value) ?? seen.get(rule.value)
        if (id !== undefined) {
          duplicates.push({ value: rule.value, id })
          continue
        }
        const row = { id: generateId(), app_id: appId, value: rule.value, tag: rule.tag ?? null }
        seen.set(rule.value, row.id)
        fresh.push(row)
      }
      const { count } = await trx
        .selectFrom('stream_rules')
        .select((eb) => eb.fn.countAll<string>().as('count'))
        .where('app_id', '=', appId)
        .executeTakeFirstOrThrow()
      if (Number(count) + fresh.length > cap) {
        return { created: [], duplicates, capExceeded: true }
      }
      const created = fresh.length
        ? await trx.insertInto('stream_rules').values(fresh).returningAll().execute()
        : []
      if (created.length > 0) await sql`SELECT pg_notify(${RULES_CHANNEL}, ${appId})`.execute(trx)
      const result = { created, duplicates, capExceeded: false }
      if (dryRun) throw new DryRunRollback(result)
      return result
    })
  } catch (err) {
    if (err instanceof DryRunRollback) return err.result
    throw err
  }
}

export interface DeleteRulesResult {
  deleted: StreamRule[]
  /** The ids or values asked for that the app does not have. */
  notFound: string[]
}

/**
 * Deletes an app's rules by id or by value; `dryRun` reports without deleting. The lists travel as
 * one array parameter each, so their length never meets Postgres's limit on parameters.
 */
export async function deleteRules(
  db: Db,
  appId: string,
  by: { ids: readonly string[] } | { values: readonly string[] } | { all: true },
  { dryRun = false }: { dryRun?: boolean } = {},
): Promise<DeleteRulesResult> {
  return db.transaction().execute(async (trx) => {
    let query = trx.selectFrom('stream_rules').selectAll().where('app_id', '=', appId)
    let asked: readonly string[] = []
    if ('ids' in by) {
      asked = by.ids
      if (asked.length === 0) return { deleted: [], notFound: [] }
      query = query.where('id', '=', sql<string>`any(${asked}::bigint[])`)
    } else if ('values' in by) {
      asked = by.values
      if (asked.length === 0) return { deleted: [], notFound: [] }
      query = query.where('value', '=', sql<string>`any(${asked}::text[])`)
    }
    const found = await query.forUpdate().execute()
    const key = 'values' in by ? (r: StreamRule) => r.value : (r: StreamRule) => r.id
    const foundKeys = new Set(found.map(key))
    const notFound = [...new Set(asked)].filter((k) => !foundKeys.has(k))
    if (!dryRun && found.length > 0) {
      await trx
        .deleteFrom('stream_rules')
        .where('id', '=', sql<string>`any(${found.map((r) => r.id)}::bigint[])`)
        .execute()
      await sql`SELECT pg_notify(${RULES_CHANNEL}, ${appId})`.execute(trx)
    }
    return { deleted: found, notFound }
  })
}

/** An app's rules, oldest first, keyset-paginated by id. */
export async function listRules(
  db: Db,
  appId: string,
  {
    ids,
    limit = 1000,
    afterId,
  }: { ids?: readonly string[]; limit?: number; afterId?: string } = {},
): Promise<StreamRule[]> {
  let query = db.selectFrom('stream_rules').selectAll().where('app_id', '=', appId)
  if (ids) {
    if (ids.length === 0) return []
    query = query.where('id', 'in', ids)
  }
  if (afterId) query = query.where('id', '>', afterId)
  return query.orderBy('id').limit(limit).execute()
}

/** Every app's rules (for in-memory rule indexes), or those of the given apps. */
export async function listAllRules(db: Db, appIds?: readonly string[]): Promise<StreamRule[]> {
  let query = db.selectFrom('stream_rules').selectAll()
  if (appIds) {
    if (appIds.length === 0) return []
    query = query.where('app_id', 'in', appIds)
  }
  return query.orderBy('id').execute()
}

/** The union of rule values over all apps: what the upstream rule set must equal. */
export async function distinctRuleValues(db: Db): Promise<string[]> {
  const rows = await db
    .selectFrom('stream_rules')
    .select('value')
    .distinct()
    .orderBy('value')
    .execute()
  return rows.map((r) => r.value)
}
