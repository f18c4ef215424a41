import { sql } from 'kysely'
import type { Db } from '../connect.js'
import type { UpstreamRule } from '../tables/index.js'

/** What the ingest believes is placed upstream, by value (the upstream's own list is the truth). */
export async function listUpstreamRules(db: Db): Promise<UpstreamRule[]> {
  return db.selectFrom('upstream_rules').selectAll().orderBy('value').execute()
}

/** Records values as placed upstream under the given ids (clears any earlier rejection). */
export async function recordPlacedRules(
  db: Db,
  rules: ReadonlyArray<{ value: string; upstream_id: string }>,
): Promise<void> {
  if (rules.length === 0) return
  await db
    .insertInto('upstream_rules')
    .values(rules.map((r) => ({ value: r.value, upstream_id: r.upstream_id, status: 'active' })))
    .onConflict((oc) =>
      oc.column('value').doUpdateSet({
        upstream_id: sql`excluded.upstream_id`,
        status: 'active',
        reason: null,
        updated_at: sql`now()`,
      }),
    )
    .execute()
}

/** Records values the upstream refused, with its reason; they are not offered again. */
export async function recordRejectedRules(
  db: Db,
  rules: ReadonlyArray<{ value: string; reason: string }>,
): Promise<void> {
  if (rules.length === 0) return
  await db
    .insertInto('upstream_rules')
    .values(
      rules.map((r) => ({
        value: r.value,
        upstream_id: null,
        status: 'rejected',
        reason: r.reason,
      })),
    )
    .onConflict((oc) =>
      oc.column('value').doUpdateSet({
        upstream_id: null,
        status: 'rejected',
        reason: sql`excluded.reason`,
        updated_at: sql`now()`,
      }),
    )
    .execute()
}

/** Forgets values (removed upstream, or no longer wanted by any app). */
export async function removeUpstreamRules(db: Db, values: readonly string[]): Promise<void> {
  if (values.length === 0) return
  await db.deleteFrom('upstream_rules').where('value', 'in', values).execute()
}
