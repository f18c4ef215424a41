import { randomUUID } from 'node:crypto'
import {
  completeComplianceJob,
  failComplianceJob,
  recoverComplianceJobs,
  renewComplianceLease,
  stagedComplianceChunk,
  storeComplianceChunk,
  withdrawnAmong,
  type Db,
} from '@threadline/db'
import { complianceJobResultLine } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import { UPLOAD_MAX_BYTES, UPLOAD_MAX_IDS } from './upload.js'

export interface ComplianceJobOptions {
  /** How long a job's worker holds it without renewing; past it, another process takes over. */
  leaseMs: number
  /** Ids per staged chunk, each checked with one statement. */
  chunkIds: number
  /** The upload limits (X's: 5 M ids, 100 MB); tests lower them. */
  maxIds: number
  maxBytes: number
}

export const DEFAULT_COMPLIANCE_JOB_OPTIONS: ComplianceJobOptions = {
  leaseMs: 30_000,
  chunkIds: 20_000,
  maxIds: UPLOAD_MAX_IDS,
  maxBytes: UPLOAD_MAX_BYTES,
}

type Withdrawn = Awaited<ReturnType<typeof withdrawnAmong>>

/** Chunks checked ahead of the one being stored: the check keeps two Postgres backends busy. */
const CHECK_AHEAD = 1

export const UPLOAD_LOST =
  'The upload was interrupted before all of it was received; create a new job and upload the ids again.'
export const CHECK_FAILED =
  'The check of the uploaded ids failed again and again; create a new job and upload the ids again.'
export const STAGING_LOST =
  'The uploaded ids were lost before they were checked (a database restart); create a new job and upload the ids again.'

/**
 * Renews a job's lease every third of its length while its worker runs; `lost` turns true once the
 * job is no longer this worker's (so it stops instead of working on beside another).
 */
export function leaseHeartbeat(
  db: Db,
  lease: { id: string; owner: string; leaseMs: number },
  log: Logger,
): { readonly lost: boolean; stop(): void } {
  let lost = false
  const timer = setInterval(() => {
    renewComplianceLease(db, lease).then(
      (mine) => void (lost ||= !mine),
      (err: unknown) => log.warn({ err, job: lease.id }, 'compliance job lease not renewed'),
    )
  }, lease.leaseMs / 3)
  timer.unref()
  return {
    get lost() {
      return lost
    },
    stop: () => clearInterval(timer),
  }
}

export interface ComplianceChecker {
  /** Names this process in the leases it takes. */
  readonly owner: string
  /** Checks a job whose upload was received (or taken over), in the background. */
  start(job: { id: string; type: 'tweets' | 'users' }): void
  /** Fails or takes over the app's jobs whose worker stopped (a lease lapsed). */
  recover(appId: string): Promise<void>
  /** Stops the checks in flight between chunks; their leases lapse and another process resumes. */
  close(): Promise<void>
}

/**
 * The checks of uploaded ids (docs/api.md §8.1): each staged chunk goes through withdrawnAmong in
 * one statement, its result lines and the progress are stored together, and the lease is renewed
 * on a timer while the check runs. A process that stops mid-check leaves the lease to lapse; the
 * next read of the job by its app (any API instance) resumes it from the first unchecked chunk.
 */
export function createComplianceChecker(deps: {
  db: Db
  log: Logger
  options: ComplianceJobOptions
}): ComplianceChecker {
  const { db, options } = deps
  const log = deps.log.child({ component: 'compliance-jobs' })
  const owner = `${randomUUID()}`
  const running = new Map<string, Promise<void>>()
  let closing = false

  const check = async (job: { id: string; type: 'tweets' | 'users' }) => {
    const kind = job.type === 'tweets' ? 'tweet' : 'user'
    const lease = { id: job.id, owner, leaseMs: options.leaseMs }
    const heartbeat = leaseHeartbeat(db, lease, log)
    const ahead: Array<Promise<Withdrawn | undefined>> = []
    try {
      const row = await db
        .selectFrom('compliance_jobs')
        .select(['checked_chunks', 'staged_chunks'])
        .where('id', '=', job.id)
        .executeTakeFirstOrThrow()
      const chunks = row.staged_chunks ?? 0
      // One chunk's ids and their withdrawn ones, or undefined when the chunk is gone.
      const checkChunk = async (chunk: number): Promise<Withdrawn | undefined> => {
        const ids = await stagedComplianceChunk(db, job.id, chunk)
        return ids ? withdrawnAmong(db, kind, ids) : undefined
      }
      // CHECK_AHEAD chunks are checked while the one before them is stored, in order.
      const queue = (chunk: number) => {
        const p = checkChunk(chunk)
        p.catch(() => {}) // awaited in turn below; a failure meanwhile is not unhandled
        ahead.push(p)
      }
      let queued = row.checked_chunks
      for (let chunk = row.checked_chunks; chunk < chunks; chunk++) {
        while (queued < chunks && queued <= chunk + CHECK_AHEAD) queue(queued++)
        if (closing || heartbeat.lost) return
        const withdrawn = await ahead.shift()!
        if (!withdrawn) {
          await failComplianceJob(db, { id: job.id, owner, error: STAGING_LOST })
          return
        }
        const results = withdrawn.map((w) => ({
          id: w.id,
          line: complianceJobResultLine({ ...w, action: 'delete' }),
        }))
        if (!(await storeComplianceChunk(db, { id: job.id, owner, chunk, results }))) return
      }
      await completeComplianceJob(db, { id: job.id, owner })
    } finally {
      heartbeat.stop()
      // Nothing of this check outlives it (close() then releases the pool safely).
      await Promise.allSettled(ahead)
    }
  }

  const start: ComplianceChecker['start'] = (job) => {
    if (closing || running.has(job.id)) return
    const run = check(job)
      .catch((err: unknown) => {
        // Left in progress: its lease lapses and the next read resumes it.
        log.error(
          { err, job: job.id },
          'compliance job check failed; it resumes once its lease lapses',
        )
      })
      .finally(() => running.delete(job.id))
    running.set(job.id, run)
  }

  return {
    owner,
    start,
    async recover(appId) {
      if (closing) return
      const resumed = await recoverComplianceJobs(db, {
        appId,
        owner,
        leaseMs: options.leaseMs,
        uploadLost: UPLOAD_LOST,
        checkFailed: CHECK_FAILED,
      })
      for (const job of resumed) {
        log.info({ job: job.id }, 'compliance job taken over from a stopped worker')
        start(job)
      }
    },
    async close() {
      closing = true
      await Promise.all(running.values())
    },
  }
}
