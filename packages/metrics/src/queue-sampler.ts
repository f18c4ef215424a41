import { Counter, Gauge, type Registry } from 'prom-client'
import type { Logger } from '@threadline/logger'
import { createQueue, queueStats, type QueueName } from '@threadline/queue'
import { type Redis } from '@threadline/redis'
import { withDeadline } from '@threadline/runtime'

export interface QueueSamplerDeps {
  registry: Registry
  /** A producer connection (fails fast; each sample has a deadline as well); the caller closes it. */
  redis: Redis
  prefix: string
  queues: readonly QueueName[]
  intervalMs: number
  logger: Logger
  /** The clock, for tests. */
  now?: () => number
}

export interface QueueSampler {
  /** Samples now, then every interval until closed. */
  start(): void
  /** One sample of every queue; never rejects (a failure is counted and logged). */
  sample(): Promise<void>
  close(): Promise<void>
}

const STATES = ['waiting', 'active', 'delayed', 'failed'] as const
/** How long close() waits for a sample under way, then for each queue object. */
const CLOSE_MS = 1_000

/** The queue families (made by the sampler; exported so the dashboard's names can be checked). */
export function queueMetrics(registry: Registry) {
  const registers = [registry]
  return {
    jobs: new Gauge({
      name: 'threadline_queue_jobs',
      help: 'Jobs per queue and state (waiting, active, delayed, failed), as last sampled',
      labelNames: ['queue', 'state'] as const,
      registers,
    }),
    oldest: new Gauge({
      name: 'threadline_queue_oldest_waiting_seconds',
      help: 'Age of the oldest waiting job (now minus its creation time); 0 when none waits',
      labelNames: ['queue'] as const,
      registers,
    }),
    errors: new Counter({
      name: 'threadline_queue_sample_errors_total',
      help: 'Queue samples that failed (Redis unreachable)',
      labelNames: ['queue'] as const,
      registers,
    }),
  }
}

/**
 * Queue depths and the age of the oldest waiting job, read from BullMQ on a timer rather than at
 * scrape time, so a slow or absent Redis never stalls a scrape. On a failed read the last values
 * stay and `threadline_queue_sample_errors_total` counts it.
 */
export function createQueueSampler(deps: QueueSamplerDeps): QueueSampler {
  const now = deps.now ?? Date.now
  const log = deps.logger.child({ component: 'queue-sampler' })
  const { jobs, oldest, errors } = queueMetrics(deps.registry)
  for (const queue of deps.queues) errors.inc({ queue }, 0)
  // A sample that takes longer than its interval (at most 10 s) counts as failed.
  const sampleMs = Math.min(Math.max(deps.intervalMs, 1_000), 10_000)
  const queues = deps.queues.map((name) => ({
    name,
    queue: createQueue(name, { connection: deps.redis, prefix: deps.prefix, logger: deps.logger }),
  }))

  const sampleOne = async ({ name, queue }: (typeof queues)[number]) => {
    try {
      // BullMQ waits for a connection that is not ready yet instead of failing (whatever the
      // connection's retry settings): without a deadline a sample begun while Redis was down
      // never ended, no later sample began, and close() waited on it.
      const stats = await withDeadline(sampleMs, 'queue sample', () => queueStats(queue))
      for (const state of STATES) jobs.set({ queue: name, state }, stats[state])
      const age = stats.oldestWaitingAt === undefined ? 0 : (now() - stats.oldestWaitingAt) / 1000
      oldest.set({ queue: name }, Math.max(0, age))
    } catch (err) {
      errors.inc({ queue: name })
      log.debug({ err, queue: name }, 'queue sample failed')
    }
  }
  const sample = async () => {
    await Promise.all(queues.map(sampleOne))
  }

  let timer: NodeJS.Timeout | undefined
  let running: Promise<void> | undefined
  let closed = false
  const tick = () => {
    running = sample().finally(() => {
      running = undefined
      if (closed) return
      timer = setTimeout(tick, deps.intervalMs)
      // Sampling alone never keeps a process alive.
      timer.unref()
    })
  }
  return {
    start() {
      if (!closed && !timer && !running) tick()
    },
    sample,
    async close() {
      closed = true
      clearTimeout(timer)
      // A sample under way ends by its deadline anyway; a stop need not wait that long.
      await withDeadline(CLOSE_MS, 'queue sample', () => running ?? Promise.resolve()).catch(
        () => {},
      )
      // BullMQ's close waits for a connection that never became ready (Redis down since the
      // start): the process's shutdown then ran into its deadline. These queues only read, and
      // the caller closes the connection itself, so past a moment they are let go.
      await Promise.all(
        queues.map(({ queue }) =>
          withDeadline(CLOSE_MS, 'queue close', () => queue.close()).catch(() => {}),
        ),
      )
    },
  }
}
