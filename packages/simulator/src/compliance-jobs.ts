import { randomBytes, timingSafeEqual } from 'node:crypto'
import { complianceJobResultLine } from '@threadline/domain'
import type { Withdrawals } from './world-withdrawals.js'

export type JobStatus = 'created' | 'in_progress' | 'failed' | 'complete' | 'expired'

/** X lets an upload happen within 15 minutes of creation, and keeps the results for a week. */
const UPLOAD_WINDOW_MS = 15 * 60_000
const DOWNLOAD_WINDOW_MS = 7 * 86_400_000
/** Job ids look like X's: 19 digits. */
const JOB_ID_BASE = 1_460_000_000_000_000_000n

export interface SimJob {
  id: string
  type: 'tweets' | 'users'
  name?: string
  resumable: boolean
  createdMs: number
  uploadToken: string
  downloadToken: string
  ids?: string[]
  uploadedMs?: number
  /** A fault: the job ends `failed` (set at upload) or `expired` (set at creation). */
  fault?: 'failed' | 'expired'
}

export interface ComplianceJobFaults {
  /** The next `count` jobs uploaded end `failed`. */
  failNext(count: number): void
  /** The next `count` jobs created are `expired` at once. */
  expireNext(count: number): void
  /** The next `count` downloads of results answer 503 (the bucket unavailable). */
  failDownloads(count: number): void
}

/** The simulator's batch compliance jobs: X's states, signed transfer URLs, results from the world. */
export class ComplianceJobs {
  private readonly jobs = new Map<string, SimJob>()
  private seq = 0n
  private failLeft = 0
  private expireLeft = 0
  private downloadFailuresLeft = 0
  /** Jobs created and uploaded (stats). */
  created = 0
  uploaded = 0

  constructor(
    private readonly withdrawals: Withdrawals,
    /** How long an uploaded job stays `in_progress`. */
    private readonly processingMs: number,
  ) {}

  readonly faults: ComplianceJobFaults = {
    failNext: (count) => void (this.failLeft += count),
    expireNext: (count) => void (this.expireLeft += count),
    failDownloads: (count) => void (this.downloadFailuresLeft += count),
  }

  /** Takes a pending download failure, if one is left. */
  takeDownloadFailure(): boolean {
    if (this.downloadFailuresLeft <= 0) return false
    this.downloadFailuresLeft--
    return true
  }

  create(type: 'tweets' | 'users', name: string | undefined, resumable: boolean): SimJob {
    this.seq++
    const job: SimJob = {
      id: String(JOB_ID_BASE + BigInt(Date.now()) * 1000n + this.seq),
      type,
      ...(name !== undefined ? { name } : {}),
      resumable,
      createdMs: Date.now(),
      uploadToken: randomBytes(16).toString('hex'),
      downloadToken: randomBytes(16).toString('hex'),
    }
    if (this.expireLeft > 0) {
      this.expireLeft--
      job.fault = 'expired'
    }
    this.jobs.set(job.id, job)
    this.created++
    return job
  }

  get(id: string): SimJob | undefined {
    return this.jobs.get(id)
  }

  list(type: 'tweets' | 'users', status?: JobStatus): SimJob[] {
    return [...this.jobs.values()]
      .filter((j) => j.type === type && (status === undefined || this.status(j) === status))
      .reverse()
  }

  status(job: SimJob, now = Date.now()): JobStatus {
    if (job.fault === 'expired') return 'expired'
    if (job.uploadedMs === undefined) {
      return now > job.createdMs + UPLOAD_WINDOW_MS ? 'expired' : 'created'
    }
    if (now < job.uploadedMs + this.processingMs) return 'in_progress'
    if (job.fault === 'failed') return 'failed'
    return now > job.uploadedMs + DOWNLOAD_WINDOW_MS ? 'expired' : 'complete'
  }

  /** X's ComplianceJob object; the transfer URLs on `base` (the simulator's own address). */
  toWire(job: SimJob, base: string): Record<string, unknown> {
    return {
      id: job.id,
      type: job.type,
      ...(job.name !== undefined ? { name: job.name } : {}),
      resumable: job.resumable,
      created_at: new Date(job.createdMs).toISOString(),
      upload_url: `${base}/_compliance/upload/${job.id}?token=${job.uploadToken}`,
      upload_expires_at: new Date(job.createdMs + UPLOAD_WINDOW_MS).toISOString(),
      download_url: `${base}/_compliance/download/${job.id}?token=${job.downloadToken}`,
      download_expires_at: new Date(job.createdMs + DOWNLOAD_WINDOW_MS).toISOString(),
      status: this.status(job),
    }
  }

  /** The job a transfer URL names, if its token is the job's. */
  byToken(id: string, token: string, which: 'upload' | 'download'): SimJob | undefined {
    const job = this.jobs.get(id)
    if (!job) return undefined
    const want = Buffer.from(which === 'upload' ? job.uploadToken : job.downloadToken)
    const given = Buffer.from(token)
    return want.length === given.length && timingSafeEqual(want, given) ? job : undefined
  }

  upload(job: SimJob, ids: string[]): void {
    job.ids = ids
    job.uploadedMs = Date.now()
    this.uploaded++
    if (this.failLeft > 0) {
      this.failLeft--
      job.fault = 'failed'
    }
  }

  /** The result lines of a complete job: one per uploaded id the world has withdrawn. */
  results(job: SimJob): string {
    const lines = this.withdrawals
      .jobResults(job.type, job.ids ?? [])
      .map((r) =>
        complianceJobResultLine(
          { id: r.id, action: 'delete', reason: r.reason, eventAt: r.redactedAt },
          r.createdAt,
        ),
      )
    return lines.length > 0 ? lines.join('\n') + '\n' : ''
  }
}
