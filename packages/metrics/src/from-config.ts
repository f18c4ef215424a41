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
const ROLE_QUEUES: Record<string, readonly QueueName[]> = {
  api: [],
  ingest: ['posts', 'backfill', 'compliance'],
  writer: ['posts', 'compliance', 'activity'],
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

export interface ProcessMetricsOptions {
  /** The roles this process runs: they label every series and choose the queues sampled. */
  roles: readonly string[]
  host: string
  /** 0: no `/metrics` server and no queue sampling (the counters still count, in memory). */
  port: number
  /** The BullMQ prefix of the queues sampled. */
  prefix: string
  queueSampleMs: number
}

export interface ProcessMetricsDeps {
  logger: Logger
  /** Opens the connection queues are sampled over, once the server listens and has queues to sample. */
  connectRedis(): Redis
}

/** The metrics options of a process running `roles`: what configuration sets, a constant for the rest. */
export function metricsOptionsFromConfig(
  config: Config,
  roles: readonly string[],
): ProcessMetricsOptions {
  return {
    roles,
    host: config.METRICS_HOST,
    port: config.METRICS_PORT,
    prefix: config.REDIS_PREFIX,
    queueSampleMs: QUEUE_SAMPLE_MS,
  }
}

export function metricsDepsFromConfig(config: Config, logger: Logger): ProcessMetricsDeps {
  return { logger, connectRedis: () => createRedis(config, 'producer', 'metrics') }
}

/**
 * The metrics of one process: a registry (labelled with the roles it runs), the `/metrics` server
 * and the queue sampler of those roles' queues. A port already taken (several processes on one
 * host) is logged, never fatal: metrics must not keep a service from running.
 */
export function createProcessMetrics(
  deps: ProcessMetricsDeps,
  options: ProcessMetricsOptions,
): ProcessMetrics {
  const { logger } = deps
  const log = logger.child({ component: 'metrics' })
  const metrics = createMetrics({ labels: { roles: [...options.roles].sort().join(',') } })
  let server: MetricsServer | undefined
  let redis: Redis | undefined
  let sampler: QueueSampler | undefined
  let started = false
  return {
    metrics,
    url: () => server?.url,
    async start() {
      if (started || options.port === 0) return
      started = true
      try {
        server = await startMetricsServer(metrics, {
          host: options.host,
          port: options.port,
          logger,
        })
        log.info({ url: `${server.url}/metrics` }, 'metrics listening')
      } catch (err) {
        log.warn(
          { err, host: options.host, port: options.port },
          'metrics server not started (set METRICS_PORT to a free port, or 0)',
        )
        return
      }
      const queues = queuesForRoles(options.roles)
      if (queues.length === 0) return
      redis = deps.connectRedis()
      // A sample failing while Redis is away is counted; the connection's own errors are noise.
      redis.on('error', () => {})
      sampler = createQueueSampler({
        registry: metrics.registry,
        redis,
        prefix: options.prefix,
        queues,
        intervalMs: options.queueSampleMs,
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
