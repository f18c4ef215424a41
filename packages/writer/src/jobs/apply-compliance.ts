import { applyComplianceEvents, storeBatch, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import {
  complianceJobSchema,
  type ComplianceJob,
  type ComplianceJobResult,
  type Job,
} from '@threadline/queue'

export interface ApplyComplianceDeps {
  db: Db
  logger: Logger
  metrics?: WriterMetrics
}

/**
 * The `compliance` job: apply the events (one transaction, idempotent: a repeat of the job, or an
 * event seen twice, changes nothing). A job that is not a list of events is kept as a reject.
 */
export function applyComplianceJob(deps: ApplyComplianceDeps) {
  const { db, metrics } = deps
  const log = deps.logger

  return async (job: Job<ComplianceJob, ComplianceJobResult>): Promise<ComplianceJobResult> => {
    const parsed = complianceJobSchema.safeParse(job.data)
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join('.')} ${i.message}`).join('; ')
      const raw = JSON.stringify(job.data ?? null).replaceAll('\\u0000', '\\\\u0000')
      const reason = `invalid compliance job ${job.id}: ${issues}`
      const rejected = { posts: [], users: [], rejects: [{ reason, raw }], empty: 0 }
      await storeBatch(db, rejected, 'queue', job.id)
      log.warn({ jobId: job.id }, reason)
      return { applied: 0, repeated: 0 }
    }
    const { events } = parsed.data
    const started = performance.now()
    const result = await applyComplianceEvents(db, events)
    const seconds = (performance.now() - started) / 1000
    const actions: Record<string, number> = {}
    let newestStreamEventAt: number | undefined
    for (const e of events) {
      actions[e.action] = (actions[e.action] ?? 0) + 1
      if (e.source !== 'stream') continue
      const at = Date.parse(e.eventAt)
      if (newestStreamEventAt === undefined || at > newestStreamEventAt) newestStreamEventAt = at
    }
    metrics?.complianceApplied({ ...result, actions, newestStreamEventAt, seconds })
    log.debug({ jobId: job.id, events: events.length, ...result }, 'compliance events applied')
    return result
  }
}
