import { abortableSleep } from '@threadline/runtime'
import { complianceEventFromJobResult, type ComplianceEvent } from '@threadline/domain'
import { sql, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import type { Redis } from '@threadline/redis'
import type { ComplianceProducer } from '../jobs/queue-compliance.js'
import type { ComplianceOptions } from '../options.js'
import type { UpstreamClient } from '../upstream.js'
import { downloadResults, uploadIds } from './transfer.js'

type JobType = 'tweets' | 'users'

/** The user event that reverses a withdrawal whose reason a job result no longer gives. */
const REVERSAL: Record<string, ComplianceEvent['action']> = {
  protected: 'user_unprotect',
  suspended: 'user_unsuspend',
  deactivated: 'user_undelete',
  deleted: 'user_undelete',
}
const TYPES: readonly JobType[] = ['tweets', 'users']

/** The chunk a sweep has a job upstream for: its ids are (afterId, lastId] of its type. */
interface ChunkJob {
  id: string
  uploadUrl: string
  downloadUrl: string
  lastId: string
  count: number
}

/** A sweep in progress, and how the last ones ended: one Redis hash, so a new leader resumes it. */
export interface SweepState {
  /** Set while a sweep is in progress (epoch ms). */
  startedAt?: number
  type: JobType
  /** The last id of `type` whose chunk is done. */
  afterId: string
  job?: ChunkJob
  /** Jobs of this sweep that failed or expired (their ids are retried by the next sweep). */
  failures: number
  lastFinishedAt?: number
  /** The last sweep all of whose jobs completed. */
  lastCompleteAt?: number
}

/** The sweep's state in Redis (docs/architecture.md, "Compliance"). */
export class SweepStore {
  readonly key: string

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.key = `${prefix}:ingest:compliance-sweep`
  }

  async read(): Promise<SweepState> {
    const f = await this.redis.hgetall(this.key)
    const num = (v: string | undefined) => (v === undefined || v === '' ? undefined : Number(v))
    const job = f.job ? (JSON.parse(f.job) as ChunkJob) : undefined
    return {
      startedAt: num(f.startedAt),
      type: f.type === 'users' ? 'users' : 'tweets',
      afterId: f.afterId ?? '0',
      ...(job ? { job } : {}),
      failures: num(f.failures) ?? 0,
      lastFinishedAt: num(f.lastFinishedAt),
      lastCompleteAt: num(f.lastCompleteAt),
    }
  }

  async write(s: SweepState): Promise<void> {
    const str = (v: number | undefined) => (v === undefined ? '' : String(v))
    await this.redis.hset(this.key, {
      startedAt: str(s.startedAt),
      type: s.type,
      afterId: s.afterId,
      job: s.job ? JSON.stringify(s.job) : '',
      failures: String(s.failures),
      lastFinishedAt: str(s.lastFinishedAt),
      lastCompleteAt: str(s.lastCompleteAt),
    })
  }
}

export interface ComplianceSweepDeps {
  db: Db
  upstream: UpstreamClient
  producer: ComplianceProducer
  store: SweepStore
  logger: Logger
  metrics?: IngestMetrics
  options: ComplianceOptions
}

type JobEnd = 'complete' | 'failed' | 'expired' | 'timeout' | 'gone'

/** Reads of a complete job's results (download, queue) before its chunk counts as failed. */
const APPLY_ATTEMPTS = 5

/**
 * `UPSTREAM_COMPLIANCE=jobs`: every interval the leader sweeps the stored ids (Posts, then users)
 * in id order through X's batch compliance jobs, a job per COMPLIANCE_JOB_MAX_IDS ids, and queues
 * the withdrawals the results name. Its progress is in Redis after each step, so a new leader
 * continues the sweep (and the job) where the last one stopped; a job that fails, expires or never
 * completes is counted and its ids wait for the next sweep.
 */
export class ComplianceSweep {
  private readonly log: Logger
  /** Failed attempts to read a complete job's results, by job (this leadership's). */
  private readonly applyFailures = new Map<string, number>()

  constructor(private readonly deps: ComplianceSweepDeps) {
    this.log = deps.logger.child({ component: 'compliance-sweep' })
  }

  /** Sweeps when due until `signal` aborts (the lease lost, or the ingest closing). */
  async run(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      let state: SweepState
      try {
        state = await this.deps.store.read()
      } catch (err) {
        this.log.warn({ err }, 'could not read the compliance sweep state')
        await abortableSleep(this.deps.options.pollMaxMs, signal)
        continue
      }
      if (state.startedAt === undefined) {
        const due = (state.lastFinishedAt ?? 0) + this.deps.options.intervalMs
        if (Date.now() < due) {
          await abortableSleep(due - Date.now(), signal)
          continue
        }
        state = { ...state, startedAt: Date.now(), type: 'tweets', afterId: '0', failures: 0 }
        delete state.job
        await this.deps.store.write(state)
        this.log.info('compliance sweep started')
      } else {
        this.log.info({ type: state.type, afterId: state.afterId }, 'compliance sweep resumed')
      }
      try {
        await this.sweep(state, signal)
      } catch (err) {
        // Upstream or Redis trouble: the state holds the progress; try again a little later.
        if (signal.aborted) return
        this.log.warn({ err }, 'compliance sweep interrupted; resuming shortly')
        await abortableSleep(this.deps.options.pollMaxMs, signal)
      }
    }
  }

  private async sweep(state: SweepState, signal: AbortSignal): Promise<void> {
    for (const type of TYPES.slice(TYPES.indexOf(state.type))) {
      if (state.type !== type) {
        state.type = type
        state.afterId = '0'
        await this.deps.store.write(state)
      }
      for (;;) {
        if (signal.aborted) return
        const job = state.job ?? (await this.startJob(state, signal))
        if (!job) break
        let end = await this.await(job, signal)
        if (end === undefined) return // stopped: the job stays in the state for the next leader
        if (end === 'complete' && !(await this.applied(type, job, state.afterId, signal))) {
          end = 'failed'
        }
        if (end !== 'complete') {
          state.failures++
          this.log.warn(
            { job: job.id, type, end, afterId: state.afterId, lastId: job.lastId },
            'compliance job did not complete; its ids are retried by the next sweep',
          )
        }
        this.deps.metrics?.complianceJobEnded(end === 'gone' ? 'failed' : end)
        state.afterId = job.lastId
        delete state.job
        await this.deps.store.write(state)
      }
    }
    const now = Date.now()
    const took = now - (state.startedAt ?? now)
    state.lastFinishedAt = now
    if (state.failures === 0) state.lastCompleteAt = now
    this.log.info({ ms: took, failures: state.failures }, 'compliance sweep finished')
    delete state.startedAt
    state.type = 'tweets'
    state.afterId = '0'
    await this.deps.store.write(state)
  }

  /**
   * Applies a complete job's results; false once they could not be read APPLY_ATTEMPTS times (the
   * chunk is then a failure, retried by the next sweep, rather than a sweep stuck on it). Throws
   * below that, so the sweep tries again shortly.
   */
  private async applied(
    type: JobType,
    job: ChunkJob,
    afterId: string,
    signal: AbortSignal,
  ): Promise<boolean> {
    try {
      await this.apply(type, job, afterId, signal)
      this.applyFailures.delete(job.id)
      return true
    } catch (err) {
      if (signal.aborted) throw err
      const attempts = (this.applyFailures.get(job.id) ?? 0) + 1
      if (attempts < APPLY_ATTEMPTS) {
        this.applyFailures.set(job.id, attempts)
        throw err
      }
      this.applyFailures.delete(job.id)
      this.log.warn({ err, job: job.id, attempts }, 'could not apply the job results; giving up')
      return false
    }
  }

  /** The next chunk of stored ids after `afterId`, created upstream and uploaded; none left: undefined. */
  private async startJob(state: SweepState, signal: AbortSignal): Promise<ChunkJob | undefined> {
    const ids = await this.storedIds(state.type, state.afterId, this.deps.options.jobMaxIds)
    if (ids.length === 0) return undefined
    const created = await this.deps.upstream.createComplianceJob(
      state.type,
      `threadline-${state.type}-after-${state.afterId}`.slice(0, 64),
      signal,
    )
    const job: ChunkJob = {
      id: created.id,
      uploadUrl: created.uploadUrl,
      downloadUrl: created.downloadUrl,
      lastId: ids[ids.length - 1]!,
      count: ids.length,
    }
    // Recorded before the upload: a new leader finds the job and uploads again if it must.
    state.job = job
    await this.deps.store.write(state)
    await uploadIds(job.uploadUrl, ids, signal)
    return job
  }

  /** Polls until the job ends; undefined when `signal` aborted first. */
  private async await(job: ChunkJob, signal: AbortSignal): Promise<JobEnd | undefined> {
    const { pollMs, pollMaxMs, jobTimeoutMs } = this.deps.options
    const deadline = Date.now() + jobTimeoutMs
    let wait = pollMs
    let uploadChecked = false
    while (!signal.aborted) {
      const seen = await this.deps.upstream.complianceJob(job.id, signal).catch((err: unknown) => {
        if (!signal.aborted)
          this.log.warn({ err, job: job.id }, 'could not read the job; polling on')
        return null
      })
      if (seen === undefined) return 'gone'
      if (seen?.status === 'complete' || seen?.status === 'failed' || seen?.status === 'expired') {
        return seen.status
      }
      if (seen?.status === 'created' && !uploadChecked) {
        // A leader stopped between creating the job and its upload: upload the chunk again.
        uploadChecked = true
        const state = await this.deps.store.read()
        const ids = await this.storedIdsUpTo(state.type, state.afterId, job.lastId)
        await uploadIds(job.uploadUrl, ids, signal)
      }
      if (Date.now() > deadline) return 'timeout'
      await abortableSleep(wait, signal)
      wait = Math.min(pollMaxMs, wait * 2)
    }
    return undefined
  }

  /**
   * Downloads a complete job's results and queues them as events, with the reversal of every
   * withdrawal of the chunk that the results no longer name (X lists only what is withdrawn now:
   * a user who is no longer protected, or a Post no longer dropped, is simply absent).
   */
  private async apply(
    type: JobType,
    job: ChunkJob,
    afterId: string,
    signal: AbortSignal,
  ): Promise<void> {
    const receivedAt = new Date().toISOString()
    const lines = await downloadResults(job.downloadUrl, signal)
    const kind = type === 'tweets' ? 'tweet' : 'user'
    const events: ComplianceEvent[] = []
    for (const line of lines) {
      const event = complianceEventFromJobResult(kind, line, receivedAt)
      if ('error' in event) {
        this.deps.metrics?.complianceUnreadable()
        this.log.warn({ job: job.id, error: event.error }, 'unreadable compliance job result')
      } else events.push(event)
    }
    const named = new Set(events.map((e) => e.id))
    for (const { id, reason } of await this.hiddenIn(type, afterId, job.lastId)) {
      if (named.has(id)) continue
      const action = kind === 'tweet' ? 'undrop' : REVERSAL[reason ?? '']
      if (action) events.push({ kind, id, action, eventAt: receivedAt, receivedAt, source: 'job' })
    }
    // Named by the job: a leader that stops after this add and before its state write adds nothing twice.
    if (events.length > 0) await this.deps.producer.add(events, `sweep-${job.id}`)
    this.log.info(
      { job: job.id, type, ids: job.count, withdrawn: events.length },
      'compliance job applied',
    )
  }

  private async storedIds(type: JobType, afterId: string, limit: number): Promise<string[]> {
    const table = type === 'tweets' ? sql.table('posts') : sql.table('users')
    // Deleted Posts are gone for good: X has nothing more to say about them.
    const live = type === 'tweets' ? sql`AND t.withdrawn IS DISTINCT FROM 'deleted'` : sql``
    // Ordered by the bigint, never by its text: ids of different lengths sort wrong as text.
    const { rows } = await sql<{ id: string }>`
      SELECT t.id::text AS id FROM ${table} t WHERE t.id > ${afterId}::bigint ${live}
      ORDER BY t.id LIMIT ${limit}`.execute(this.deps.db)
    return rows.map((r) => r.id)
  }

  /** The chunk's ids that the store holds hidden (reversible withdrawals), with their reason. */
  private async hiddenIn(type: JobType, afterId: string, lastId: string) {
    const table = type === 'tweets' ? sql.table('posts') : sql.table('users')
    const { rows } = await sql<{ id: string; reason: string | null }>`
      SELECT t.id::text AS id, t.withdrawn_reason AS reason FROM ${table} t
      WHERE t.id > ${afterId}::bigint AND t.id <= ${lastId}::bigint
        AND t.withdrawn = 'hidden'`.execute(this.deps.db)
    return rows
  }

  private async storedIdsUpTo(type: JobType, afterId: string, lastId: string): Promise<string[]> {
    const table = type === 'tweets' ? sql.table('posts') : sql.table('users')
    const { rows } = await sql<{ id: string }>`
      SELECT t.id::text AS id FROM ${table} t
      WHERE t.id > ${afterId}::bigint AND t.id <= ${lastId}::bigint ORDER BY t.id`.execute(
      this.deps.db,
    )
    return rows.map((r) => r.id)
  }
}
