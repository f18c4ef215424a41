import { sql } from 'kysely'
import { generateId } from '@threadline/domain'
import type { Db } from '../connect.js'
import type { ComplianceJobRow } from '../tables/index.js'

// Batch compliance jobs served to Threadline's clients (docs/api.md §8.1): a job, its staged
// upload (a chunk of ids per row), its results, and the lease of the API process working it.

export type ComplianceJobType = 'tweets' | 'users'
/** The statuses X shows: `expired` is derived from the expiry times, never stored. */
export type ComplianceJobStatus = 'created' | 'in_progress' | 'failed' | 'complete' | 'expired'

/** Jobs a list returns, newest first (X lists an app's recent jobs, unpaged). */
const LIST_LIMIT = 100

export async function createComplianceJob(
  db: Db,
  job: {
    appId: string
    type: ComplianceJobType
    name?: string
    resumable: boolean
    uploadExpiresAt: Date
    downloadExpiresAt: Date
  },
): Promise<ComplianceJobRow> {
  return db
    .insertInto('compliance_jobs')
    .values({
      id: generateId(),
      app_id: job.appId,
      type: job.type,
      name: job.name ?? null,
      resumable: job.resumable,
      upload_expires_at: job.uploadExpiresAt,
      download_expires_at: job.downloadExpiresAt,
    })
    .returningAll()
    .executeTakeFirstOrThrow()
}

/** One of the app's jobs; another app's job is not found. */
export async function findComplianceJob(
  db: Db,
  appId: string,
  id: string,
): Promise<ComplianceJobRow | undefined> {
  return db
    .selectFrom('compliance_jobs')
    .selectAll()
    .where('id', '=', id)
    .where('app_id', '=', appId)
    .executeTakeFirst()
}

/** A job by id alone, for its signed URLs (the signature names the job). */
export async function findComplianceJobById(
  db: Db,
  id: string,
): Promise<ComplianceJobRow | undefined> {
  return db.selectFrom('compliance_jobs').selectAll().where('id', '=', id).executeTakeFirst()
}

/** The app's jobs of a type, newest first; `status` as X shows it (expired derived from times). */
export async function listComplianceJobs(
  db: Db,
  q: { appId: string; type: ComplianceJobType; status?: ComplianceJobStatus; now: Date },
): Promise<ComplianceJobRow[]> {
  let query = db
    .selectFrom('compliance_jobs')
    .selectAll()
    .where('app_id', '=', q.appId)
    .where('type', '=', q.type)
  const s = q.status
  if (s === 'expired') {
    query = query.where((eb) =>
      eb.or([
        eb.and([eb('status', '=', 'created'), eb('upload_expires_at', '<=', q.now)]),
        eb.and([eb('status', '=', 'complete'), eb('download_expires_at', '<=', q.now)]),
      ]),
    )
  } else if (s === 'created') {
    query = query.where('status', '=', s).where('upload_expires_at', '>', q.now)
  } else if (s === 'complete') {
    query = query.where('status', '=', s).where('download_expires_at', '>', q.now)
  } else if (s !== undefined) {
    query = query.where('status', '=', s)
  }
  return query.orderBy('created_at', 'desc').orderBy('id', 'desc').limit(LIST_LIMIT).execute()
}

/** The status X shows for a stored job at `now`. */
export function complianceJobStatus(job: ComplianceJobRow, now: Date): ComplianceJobStatus {
  if (job.status === 'created' && job.upload_expires_at <= now) return 'expired'
  if (job.status === 'complete' && job.download_expires_at <= now) return 'expired'
  return job.status
}

/**
 * Takes a `created` job for its upload (status in_progress, leased to `owner`). Undefined when the
 * job is not `created` any more or its upload URL has expired.
 */
export async function claimComplianceUpload(
  db: Db,
  q: { id: string; owner: string; leaseMs: number },
): Promise<ComplianceJobRow | undefined> {
  return db
    .updateTable('compliance_jobs')
    .set({
      status: 'in_progress',
      lease_owner: q.owner,
      lease_until: sql<Date>`now() + ${`${q.leaseMs} milliseconds`}::interval`,
    })
    .where('id', '=', q.id)
    .where('status', '=', 'created')
    .where('upload_expires_at', '>', sql<Date>`now()`)
    .returningAll()
    .executeTakeFirst()
}

/** Stages one chunk of uploaded ids. */
export async function stageComplianceIds(
  db: Db,
  jobId: string,
  chunk: number,
  ids: readonly string[],
): Promise<void> {
  await sql`INSERT INTO compliance_job_uploads (job_id, chunk, ids)
    VALUES (${jobId}, ${chunk}, ${ids}::bigint[])`.execute(db)
}

/** An update of a job in progress under `owner`'s lease: it changes nothing once it is not. */
const updateLeasedJob = (db: Db, q: { id: string; owner: string }) =>
  db
    .updateTable('compliance_jobs')
    .where('id', '=', q.id)
    .where('status', '=', 'in_progress')
    .where('lease_owner', '=', q.owner)

/** The upload was received whole: the check may start (or resume, on another process). */
export async function completeComplianceUpload(
  db: Db,
  q: { id: string; owner: string; chunks: number; ids: number },
): Promise<boolean> {
  const row = await updateLeasedJob(db, q)
    .set({ uploaded_at: sql<Date>`now()`, staged_chunks: q.chunks, uploaded_ids: String(q.ids) })
    .returning('id')
    .executeTakeFirst()
  return row !== undefined
}

/** Extends `owner`'s lease; false when the job is no longer its own (lapsed and taken, or done). */
export async function renewComplianceLease(
  db: Db,
  q: { id: string; owner: string; leaseMs: number },
): Promise<boolean> {
  const row = await updateLeasedJob(db, q)
    .set({ lease_until: sql<Date>`now() + ${`${q.leaseMs} milliseconds`}::interval` })
    .returning('id')
    .executeTakeFirst()
  return row !== undefined
}

/** Ends a job as failed with `error`, and drops what it staged. `owner`: only while its own. */
export async function failComplianceJob(
  db: Db,
  q: { id: string; error: string; owner?: string },
): Promise<void> {
  await db.transaction().execute(async (trx) => {
    let update = trx
      .updateTable('compliance_jobs')
      .set({ status: 'failed', error: q.error, lease_owner: null, lease_until: null })
      .where('id', '=', q.id)
      .where('status', '=', 'in_progress')
    if (q.owner !== undefined) update = update.where('lease_owner', '=', q.owner)
    const done = await update.returning('id').executeTakeFirst()
    if (!done) return
    await trx.deleteFrom('compliance_job_uploads').where('job_id', '=', q.id).execute()
    await trx.deleteFrom('compliance_job_results').where('job_id', '=', q.id).execute()
  })
}

/** One staged chunk's ids (undefined when it is not there: lost with an unlogged table). */
export async function stagedComplianceChunk(
  db: Db,
  jobId: string,
  chunk: number,
): Promise<string[] | undefined> {
  const row = await db
    .selectFrom('compliance_job_uploads')
    .select('ids')
    .where('job_id', '=', jobId)
    .where('chunk', '=', chunk)
    .executeTakeFirst()
  return row?.ids
}

/**
 * Stores one checked chunk's result lines and counts the chunk as checked, in one transaction, so
 * a resumed check neither skips nor repeats a chunk. A repeated id keeps its first line.
 */
export async function storeComplianceChunk(
  db: Db,
  q: {
    id: string
    owner: string
    chunk: number
    results: ReadonlyArray<{ id: string; line: string }>
  },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const progressed = await updateLeasedJob(trx, q)
      .set({ checked_chunks: q.chunk + 1 })
      .where('checked_chunks', '=', q.chunk)
      .returning('id')
      .executeTakeFirst()
    if (!progressed) return false
    if (q.results.length > 0) {
      await sql`INSERT INTO compliance_job_results (job_id, id, line)
        SELECT ${q.id}::bigint, r.id, r.line
        FROM unnest(${q.results.map((r) => r.id)}::bigint[], ${q.results.map((r) => r.line)}::text[])
          AS r(id, line)
        ON CONFLICT DO NOTHING`.execute(trx)
    }
    return true
  })
}

/** Every chunk checked: the job is complete, its staged ids dropped. */
export async function completeComplianceJob(
  db: Db,
  q: { id: string; owner: string },
): Promise<boolean> {
  return db.transaction().execute(async (trx) => {
    const done = await updateLeasedJob(trx, q)
      .set({
        status: 'complete',
        completed_at: sql<Date>`now()`,
        lease_owner: null,
        lease_until: null,
      })
      .returning('id')
      .executeTakeFirst()
    if (!done) return false
    await trx.deleteFrom('compliance_job_uploads').where('job_id', '=', q.id).execute()
    return true
  })
}

/** Takeovers of one job's check before it fails: a check that fails every time must end. */
const MAX_TAKEOVERS = 3

/**
 * The app's in-progress jobs whose worker stopped (its lease lapsed): those whose upload was not
 * received whole are failed with `uploadLost`, those taken over MAX_TAKEOVERS times already with
 * `checkFailed`; the others are handed to `owner` to resume the check, and returned.
 */
export async function recoverComplianceJobs(
  db: Db,
  q: { appId: string; owner: string; leaseMs: number; uploadLost: string; checkFailed: string },
): Promise<ComplianceJobRow[]> {
  const lapsed = await db
    .selectFrom('compliance_jobs')
    .select(['id', 'uploaded_at', 'takeovers'])
    .where('app_id', '=', q.appId)
    .where('status', '=', 'in_progress')
    .where('lease_until', '<', sql<Date>`now()`)
    .execute()
  const resumed: ComplianceJobRow[] = []
  for (const job of lapsed) {
    if (job.uploaded_at === null || job.takeovers >= MAX_TAKEOVERS) {
      const error = job.uploaded_at === null ? q.uploadLost : q.checkFailed
      await failComplianceJob(db, { id: job.id, error })
      continue
    }
    const taken = await db
      .updateTable('compliance_jobs')
      .set((eb) => ({
        lease_owner: q.owner,
        lease_until: sql<Date>`now() + ${`${q.leaseMs} milliseconds`}::interval`,
        takeovers: eb('takeovers', '+', 1),
      }))
      .where('id', '=', job.id)
      .where('status', '=', 'in_progress')
      .where('lease_until', '<', sql<Date>`now()`)
      .returningAll()
      .executeTakeFirst()
    if (taken) resumed.push(taken)
  }
  return resumed
}

/** A page of a job's result lines in id order, after `afterId`. */
export async function complianceResultsPage(
  db: Db,
  q: { jobId: string; afterId?: string; limit: number },
): Promise<Array<{ id: string; line: string }>> {
  let query = db
    .selectFrom('compliance_job_results')
    .select(['id', 'line'])
    .where('job_id', '=', q.jobId)
  if (q.afterId !== undefined) query = query.where('id', '>', q.afterId)
  return query.orderBy('id').limit(q.limit).execute()
}

/**
 * Drops up to `limit` result lines of jobs whose download has expired (no one may fetch them any
 * more); the number dropped. Run as jobs are created, a bounded batch each time, so that it stays
 * far inside the API's statement timeout whatever has expired.
 */
export async function dropExpiredComplianceResults(
  db: Db,
  now: Date,
  limit = 20_000,
): Promise<number> {
  const result = await sql`DELETE FROM compliance_job_results
    WHERE (job_id, id) IN (
      SELECT r.job_id, r.id FROM compliance_job_results r
      JOIN compliance_jobs j ON j.id = r.job_id
      WHERE j.download_expires_at <= ${now}
      LIMIT ${limit})`.execute(db)
  return Number(result.numAffectedRows ?? 0)
}
