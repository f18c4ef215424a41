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

/**
 * The `seq` of the newest event applied before `appliedBefore` ('0' when none): a
 * `backfill_minutes` replay starts after it. Read backwards along the primary key from the head,
 * so it costs the events of the window, not the log.
 */
export async function complianceLogSeqBefore(db: Db, appliedBefore: Date): Promise<string> {
  const { rows } = await sql<{ seq: string }>`
    SELECT seq::text AS seq FROM compliance_log
    WHERE applied_at < ${appliedBefore}
    ORDER BY compliance_log.seq DESC LIMIT 1`.execute(db)
  return rows[0]?.seq ?? '0'
}
