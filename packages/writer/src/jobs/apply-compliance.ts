import { applyComplianceEvents, storeBatch, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { WriterMetrics } from '@threadline/metrics'
import { eraseStoredPosts, type Redis } from '@threadline/redis'
import {
  complianceJobSchema,
  eraseActivityPosts,
  type ComplianceJob,
  type ComplianceJobResult,
  type Job,
} from '@threadline/queue'

export interface ApplyComplianceDeps {
  db: Db
  redis: Redis
  logger: Logger
  metrics?: WriterMetrics
  /** The Redis prefix of the `stored` stream, and how long it keeps entries. */
  prefix: string
  streamRetentionMs: number
}

/** Attempts to erase from the streams before the job gives up on it (see below). */
const ERASE_ATTEMPTS = 5

/**
 * The `compliance` job: apply the events (one transaction, idempotent: a repeat of the job, or an
 * event seen twice, changes nothing), then erase the Posts it erased from what the
 * `backfill_minutes` replays read, the `stored` and activity streams (docs/api.md §7). A job that
 * is not a list of events is kept as a reject.
 */
export function applyComplianceJob(deps: ApplyComplianceDeps) {
  const { db, metrics } = deps
  const log = deps.logger

  // Retried here, not by the job: a second run of the job erases nothing (its events are logged),
  // so it could not find these Posts again.
  const eraseFromStream = async (posts: Parameters<typeof eraseStoredPosts>[2]) => {
    for (let attempt = 1; ; attempt++) {
      try {
        await eraseStoredPosts(deps.redis, deps.prefix, posts, deps.streamRetentionMs)
        await eraseActivityPosts(deps.redis, deps.prefix, posts, deps.streamRetentionMs)
        return
      } catch (err) {
        if (attempt >= ERASE_ATTEMPTS) {
          log.error(
            { err, posts: posts.length },
            'could not erase Posts from the stored and activity streams',
          )
          return
        }
        await new Promise((r) => setTimeout(r, 200 * 2 ** attempt))
      }
    }
  }

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
    const { applied, repeated, erased } = await applyComplianceEvents(db, events)
    const result = { applied, repeated }
    const seconds = (performance.now() - started) / 1000
    if (erased.length > 0) await eraseFromStream(erased)
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
