import { sql, type Kysely } from 'kysely'

// Batch compliance jobs served to Threadline's clients (docs/api.md §8.1). A job's uploaded ids
// are staged a chunk per row (a bigint[]), so a 5 M-id upload is a few hundred rows, read back
// chunk by chunk while it is checked; the staging table is unlogged (it only lives until the job
// completes). Results are kept, rendered, until the download URL expires.
export async function up(db: Kysely<any>): Promise<void> {
  await sql`
    CREATE TABLE compliance_jobs (
      id bigint PRIMARY KEY,
      app_id bigint NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
      type text NOT NULL CHECK (type IN ('tweets', 'users')),
      name text,
      resumable boolean NOT NULL DEFAULT false,
      status text NOT NULL DEFAULT 'created'
        CHECK (status IN ('created', 'in_progress', 'failed', 'complete')),
      error text,
      created_at timestamptz NOT NULL DEFAULT now(),
      upload_expires_at timestamptz NOT NULL,
      download_expires_at timestamptz NOT NULL,
      lease_owner text,
      lease_until timestamptz,
      uploaded_at timestamptz,
      uploaded_ids bigint,
      staged_chunks integer,
      checked_chunks integer NOT NULL DEFAULT 0,
      takeovers integer NOT NULL DEFAULT 0,
      completed_at timestamptz
    )`.execute(db)
  await sql`CREATE INDEX compliance_jobs_app_idx
    ON compliance_jobs (app_id, type, created_at DESC)`.execute(db)
  await sql`
    CREATE UNLOGGED TABLE compliance_job_uploads (
      job_id bigint NOT NULL REFERENCES compliance_jobs(id) ON DELETE CASCADE,
      chunk integer NOT NULL,
      ids bigint[] NOT NULL,
      PRIMARY KEY (job_id, chunk)
    )`.execute(db)
  await sql`
    CREATE TABLE compliance_job_results (
      job_id bigint NOT NULL REFERENCES compliance_jobs(id) ON DELETE CASCADE,
      id bigint NOT NULL,
      line text NOT NULL,
      PRIMARY KEY (job_id, id)
    )`.execute(db)
}

export async function down(db: Kysely<any>): Promise<void> {
  await sql`DROP TABLE IF EXISTS compliance_job_results`.execute(db)
  await sql`DROP TABLE IF EXISTS compliance_job_uploads`.execute(db)
  await sql`DROP TABLE IF EXISTS compliance_jobs`.execute(db)
}
