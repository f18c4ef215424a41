import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createRedis } from '@threadline/redis'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { watchJobs, type JobWatch } from './job-watch.js'
import { createQueue, createWorker, UnrecoverableError } from './queues.js'

/**
 * The one job watcher against real BullMQ (each test within its vitest deadline): a job's turn at a worker, its final outcome, and the
 * progress feed of every completion.
 */
/** Within the watcher's first state check (5 s): what settles by then came from the events. */
const EVENTS_MS = 4_500
let env: TestEnv
let watch: JobWatch<{ n: number }>
let queue: ReturnType<typeof createQueue<{ n: number; fail?: 'once' | 'for-good' }>>
const completed: Array<[string, number]> = []
let openRetryGate: () => void = () => {}
const retryGate = new Promise<void>((resolve) => (openRetryGate = resolve))

beforeAll(async () => {
  env = await createTestEnv()
  const deps = { connection: env.redis, prefix: env.prefix, logger: env.logger }
  queue = createQueue('webhooks', deps)
  env.defer(() => queue.close())
  const workerRedis = createRedis(env.redisUrl, 'worker', 'job-watch-test')
  const worker = createWorker<{ n: number; fail?: 'once' | 'for-good' }, { n: number }>(
    'webhooks',
    async (job) => {
      if (job.data.fail === 'for-good') throw new UnrecoverableError('bad payload')
      if (job.data.fail === 'once' && job.attemptsMade === 0) throw new Error('try again')
      // The retry waits for the test, so that only the end of the first turn can have come.
      if (job.data.fail === 'once') await retryGate
      return { n: job.data.n * 2 }
    },
    { ...deps, connection: workerRedis },
    { concurrency: 2, lockDuration: 30_000, stalledInterval: 30_000, maxStalledCount: 1 },
  )
  env.defer(async () => {
    await worker.close()
    workerRedis.disconnect()
  })
  void worker.run()
  watch = await watchJobs(queue, 'webhooks', env.prefix, env.redis)
  env.defer(() => watch.close())
  watch.onCompleted((id, result) => completed.push([id, result.n]))
})
afterAll(() => env?.close())

describe('watchJobs', () => {
  it(
    'settles a job that completes: its turn, its result, and the progress feed',
    { timeout: EVENTS_MS },
    async () => {
      const done = watch.done('job-a')
      const outcome = watch.outcome('job-a')
      await queue.add('w', { n: 21 }, { jobId: 'job-a' })
      await done
      expect(await outcome).toEqual({
        id: 'job-a',
        result: { n: 42 },
      })
      expect(completed).toContainEqual(['job-a', 42])
      expect(watch.watching).toBe(0)
    },
  )

  it(
    'ends a turn at a retry, and gives the outcome only once the retry completes',
    { timeout: EVENTS_MS },
    async () => {
      const outcome = watch.outcome('job-b')
      const firstTurn = watch.done('job-b')
      let settled = false
      void outcome.then(() => (settled = true))
      await queue.add('w', { n: 5, fail: 'once' }, { jobId: 'job-b' })
      await firstTurn
      expect(settled).toBe(false)
      openRetryGate()
      expect(await outcome).toEqual({
        id: 'job-b',
        result: { n: 10 },
      })
    },
  )

  it('gives the failure of a job that fails for good', { timeout: EVENTS_MS }, async () => {
    const outcome = watch.outcome('job-c')
    await queue.add('w', { n: 1, fail: 'for-good' }, { jobId: 'job-c' })
    expect(await outcome).toEqual({
      id: 'job-c',
      error: 'bad payload',
    })
  })

  it(
    'finds the end of a job asked about after it ended, by its state',
    { timeout: 25_000 },
    async () => {
      const early = watch.outcome('job-d')
      await queue.add('w', { n: 4 }, { jobId: 'job-d' })
      await early
      // The completion event is past: only the state check (within two check periods) finds it.
      expect(await watch.outcome('job-d')).toEqual({ id: 'job-d', result: { n: 8 } })
    },
  )
})
