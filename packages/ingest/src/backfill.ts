import { ensureBackfills, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { UnrecoverableError, createQueue, createWorker, type Job } from '@threadline/queue'
import { type Redis } from '@threadline/redis'
import {
  BackfillRunner,
  backfillJobId,
  type BackfillDeps,
  type BackfillJob,
} from './jobs/backfill-conversation.js'
import { RECOVER_JOB, recoverWindow, type RecoverJob } from './jobs/recover-window.js'

export * from './jobs/backfill-conversation.js'
export * from './jobs/recover-window.js'

export interface BackfillQueue {
  /** Enqueues (or leaves queued) the backfill of each conversation not yet backfilled. */
  enqueue(conversationIds: readonly string[]): Promise<void>
  /** Enqueues the search of a window the stream missed (a repeat of `jobId` is a no-op). */
  recover(jobId: string, job: RecoverJob): Promise<void>
  close(): Promise<void>
}

/**
 * The producer side: records the backfills to do, then adds one job per conversation; and the
 * windows to recover, in the same queue (they spend the same search rate limit).
 */
export function createBackfillQueue(deps: {
  db: Db
  redis: Redis
  prefix: string
  logger: Logger
}): BackfillQueue {
  const queue = createQueue<BackfillJob | RecoverJob>('backfill', {
    connection: deps.redis,
    prefix: deps.prefix,
    logger: deps.logger,
  })
  return {
    async enqueue(conversationIds) {
      const todo = await ensureBackfills(deps.db, conversationIds)
      if (todo.length === 0) return
      // The same job id while a job waits or runs makes a repeat add a no-op.
      await queue.addBulk(
        todo.map((b) => ({
          name: 'backfill',
          data: { conversation_id: b.conversation_id },
          opts: { jobId: backfillJobId(b.conversation_id) },
        })),
      )
    },
    async recover(jobId, job) {
      await queue.add(RECOVER_JOB, job, { jobId })
    },
    close: () => queue.close(),
  }
}

export interface BackfillWorkerDeps extends BackfillDeps {
  redis: Redis
  prefix: string
  metrics?: IngestMetrics
  /** The longest OR-combined query of a window recovery (UPSTREAM_QUERY_MAX_LENGTH). */
  queryMaxLength: number
}

/** The consumer side: conversation backfills and window recoveries; safe on every replica. */
export function createBackfillWorker(deps: BackfillWorkerDeps) {
  const runner = new BackfillRunner(deps)
  const abort = new AbortController()
  const recoverDeps = {
    ...deps,
    pacer: runner.pacer,
    options: { search: deps.options.search, queryMaxLength: deps.queryMaxLength },
  }
  const worker = createWorker<BackfillJob | RecoverJob, string>(
    'backfill',
    async (job: Job<BackfillJob | RecoverJob, string>) => {
      if (job.name === RECOVER_JOB) {
        return recoverWindow(job as Job<RecoverJob>, recoverDeps, abort.signal)
      }
      const id = (job.data as Partial<BackfillJob> | undefined)?.conversation_id
      if (typeof id !== 'string' || !/^\d{1,19}$/.test(id)) {
        throw new UnrecoverableError(`invalid backfill job ${job.id}: ${JSON.stringify(job.data)}`)
      }
      return runner.run(id, abort.signal)
    },
    { connection: deps.redis, prefix: deps.prefix, logger: deps.logger },
    {
      concurrency: deps.options.concurrency,
      lockDuration: deps.options.lockDuration ?? 30_000,
      stalledInterval: deps.options.stalledInterval ?? 30_000,
      maxStalledCount: 20,
    },
  )
  const log = deps.logger.child({ component: 'backfill' })
  worker.on('failed', (job, err) =>
    log.warn({ err, jobId: job?.id, attempts: job?.attemptsMade }, 'backfill job failed'),
  )
  return {
    runner,
    async start() {
      void worker.run().catch((err: unknown) => log.error({ err }, 'backfill worker stopped'))
      await worker.waitUntilReady()
    },
    async close() {
      // Interrupt waits and requests: the job fails this attempt and resumes from its progress.
      abort.abort()
      await worker.close()
    },
  }
}
