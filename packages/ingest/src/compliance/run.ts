import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { watchJobs, type ComplianceJob, type createQueue } from '@threadline/queue'
import type { Redis } from '@threadline/redis'
import type { ComplianceProducer } from '../jobs/queue-compliance.js'
import type { IngestOptions } from '../options.js'
import type { UpstreamClient } from '../upstream.js'
import { ComplianceMarks } from './marks.js'
import { ComplianceStreams } from './streams.js'
import { ComplianceSweep, SweepStore } from './sweep.js'

export interface ComplianceDeps {
  db: Db
  upstream: UpstreamClient
  /** The blocking connection the job watch reads BullMQ's events on. */
  workerRedis: Redis
  redis: Redis
  queue: ReturnType<typeof createQueue<ComplianceJob>>
  producer: ComplianceProducer
  prefix: string
  logger: Logger
  metrics?: IngestMetrics
  options: IngestOptions
}

/**
 * The leader's compliance duty for one leadership (UPSTREAM_COMPLIANCE): the compliance streams, the
 * sweep through batch jobs, or nothing. Returns what stops it.
 */
export async function startCompliance(deps: ComplianceDeps): Promise<{ close(): Promise<void> }> {
  const compliance = deps.options.compliance
  if (!compliance || compliance.mode === 'off') return { close: async () => {} }
  const log = deps.logger.child({ component: 'compliance' })
  if (compliance.mode === 'stream') {
    const watch = await watchJobs(deps.queue, 'compliance', deps.prefix, deps.workerRedis)
    const streams = new ComplianceStreams({
      upstream: deps.upstream,
      producer: deps.producer,
      marks: new ComplianceMarks(deps.redis, deps.prefix),
      done: (id) => watch.done(id),
      logger: deps.logger,
      metrics: deps.metrics,
      options: deps.options,
    })
    streams.start()
    log.info('reading the compliance streams (8 partitions)')
    return {
      async close() {
        await streams.close(deps.options.shutdownTimeoutMs)
        await watch.close()
      },
    }
  }
  const stop = new AbortController()
  const sweep = new ComplianceSweep({
    db: deps.db,
    upstream: deps.upstream,
    producer: deps.producer,
    store: new SweepStore(deps.redis, deps.prefix),
    logger: deps.logger,
    metrics: deps.metrics,
    options: compliance,
  })
  const running = sweep.run(stop.signal)
  return {
    async close() {
      stop.abort()
      await running
    },
  }
}
