import type { Config } from '@threadline/config'
import type { Logger } from '@threadline/logger'
import { type QueueName } from '@threadline/queue'
import { closeRedis, createRedis, type Redis } from '@threadline/redis'
import { once, type Service } from '@threadline/runtime'
import { createMetrics, type Metrics } from './metrics.js'
import { createQueueSampler, type QueueSampler } from './queue-sampler.js'
import { startMetricsServer, type MetricsServer } from './server.js'

/** How often queue depths and the oldest waiting job's age are read from BullMQ. */
const QUEUE_SAMPLE_MS = 5_000

/** The queues each role works on, whose depth and age its process samples. */
export const ROLE_QUEUES: Record<string, readonly QueueName[]> = {
  api: [],
  ingest: ['posts', 'backfill'],
  writer: ['posts', 'activity'],
  delivery: ['activity', 'webhooks'],
}

export function queuesForRoles(roles: readonly string[]): QueueName[] {
  return [...new Set(roles.flatMap((role) => ROLE_QUEUES[role] ?? []))]
}

export interface ProcessMetrics extends Service {
  /** The process's one registry; pass it to every role's factory. */
  readonly metrics: Metrics
  /** Where `/metrics` is served once started; undefined when disabled or the port was taken. */
  url(): string | undefined
}

/**
 * The metrics of one process from configuration: a registry (labelled with the roles it runs), the
 * `/metrics` server on METRICS_HOST:METRICS_PORT and the queue sampler of those roles' queues.
 * METRICS_PORT=0 disables the server and the sampling (the counters still count, in memory).
 * A port already taken (several processes on one host) is logged, never fatal: metrics must not
 * keep a service from running.
 */
export function metricsFromConfig(
  config: Config,
  logger: Logger,
  roles: readonly string[],
  tuning: { queueSampleMs?: number } = {},
): ProcessMetrics {
  const log = logger.child({ component: 'metrics' })
  const metrics = createMetrics({ labels: { roles: [...roles].sort().join(',') } })
  let server: MetricsServer | undefined
  let redis: Redis | undefined
  let sampler: QueueSampler | undefined
  let started = false
  return {
    metrics,
    url: () => server?.url,
    async start() {
      if (started || config.METRICS_PORT === 0) return
      started = true
      try {
        server = await startMetricsServer(metrics, {
          host: config.METRICS_HOST,
          port: config.METRICS_PORT,
          logger,
        })
        log.info({ url: `${server.url}/metrics` }, 'metrics listening')
      } catch (err) {
        log.warn(
          { err, host: config.METRICS_HOST, port: config.METRICS_PORT },
          'metrics server not started (set METRICS_PORT to a free port, or 0)',
        )
        return
      }
      const queues = queuesForRoles(roles)
      if (queues.length === 0) return
      redis = createRedis(config, 'producer', 'metrics')
      // A sample failing while Redis is away is counted; the connection's own errors are noise.
      redis.on('error', () => {})
      sampler = createQueueSampler({
        registry: metrics.registry,
        redis,
        prefix: config.REDIS_PREFIX,
        queues,
        intervalMs: tuning.queueSampleMs ?? QUEUE_SAMPLE_MS,
        logger,
      })
      sampler.start()
    },
    close: once(async () => {
      await sampler?.close()
      if (redis) await closeRedis(redis)
      await server?.close()
    }),
  }
}
