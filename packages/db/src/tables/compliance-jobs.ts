import type { Generated, Selectable } from 'kysely'
import type { Int8, Timestamp, GeneratedTimestamp } from './columns.js'

/** A batch compliance job an app made (docs/api.md §8.1). */
export interface ComplianceJobsTable {
  id: Int8
  app_id: Int8
  type: 'tweets' | 'users'
  name: string | null
  resumable: Generated<boolean>
  /** `expired` is not stored: it is read from the expiry times. */
  status: Generated<'created' | 'in_progress' | 'failed' | 'complete'>
  /** Why a failed job failed, in words for the client. */
  error: string | null
  created_at: GeneratedTimestamp
  upload_expires_at: Timestamp
  download_expires_at: Timestamp
  /** The API process working the job (upload or check), while `lease_until` is ahead. */
  lease_owner: string | null
  lease_until: Timestamp | null
  /** Set once the whole upload was received and staged. */
  uploaded_at: Timestamp | null
  uploaded_ids: Int8 | null
  staged_chunks: number | null
  /** Staged chunks already checked: a resumed check starts here. */
  checked_chunks: Generated<number>
  /** Times another worker took the check over; past a bound the job fails instead. */
  takeovers: Generated<number>
  completed_at: Timestamp | null
}
export type ComplianceJobRow = Selectable<ComplianceJobsTable>

/** Uploaded ids, one row per chunk, until the job's check is done. */
export interface ComplianceJobUploadsTable {
  job_id: Int8
  chunk: number
  ids: string[]
}

/** One JSON line of a job's result (an uploaded id Threadline knows to be withdrawn). */
export interface ComplianceJobResultsTable {
  job_id: Int8
  id: Int8
  line: string
}
