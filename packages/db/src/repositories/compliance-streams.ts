import { sql } from 'kysely'
import type { Db } from '../connect.js'

/**
 * The newest `seq` of the compliance log ('0' when empty): where the compliance streams' poller
 * starts (docs/api.md §8.2), so that it delivers only what is applied from then on.
 */
export async function complianceLogHead(db: Db): Promise<string> {
  const { rows } = await sql<{ seq: string }>`
    SELECT coalesce(max(seq), 0)::text AS seq FROM compliance_log`.execute(db)
  return rows[0]?.seq ?? '0'
}
