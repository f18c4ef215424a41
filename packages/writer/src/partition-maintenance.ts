import type { Config } from '@threadline/config'
import { maintainPartitions, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { closeRedis, createLease, createRedis } from '@threadline/redis'
import { repeatEvery, type Repeating, type Service } from '@threadline/runtime'

/** How often the leader makes the next days' partitions (and expires old ones): well within a day. */
const MAINTENANCE_MS = 3_600_000
/** A writer that took the lease and died is replaced within this. */
const LEASE_MS = 60_000

/**
 * Wraps a writer so that, in whichever writer holds the `partitions` lease, a maintenance pass
 * runs at start and every MAINTENANCE_MS: partitions DAYS_AHEAD days ahead, and with
 * POSTS_RETENTION_DAYS the expiry of older ones (docs/operations.md). A pass that fails is logged
 * and tried again on the next; until a missing day exists the writer retries its batches.
 */
export function withPartitionMaintenance<S extends Service>(
  service: S,
  db: Db,
  config: Config,
  logger: Logger,
  everyMs = MAINTENANCE_MS,
): S {
  const log = logger.child({ component: 'partitions' })
  const redis = createRedis(config, 'producer', 'partitions')
  const lease = createLease(redis, `${config.REDIS_PREFIX}:partitions:leader`, {
    ttlMs: LEASE_MS,
    logger,
  })
  const pass = async () => {
    if (!(await lease.tryAcquire())) return
    const result = await maintainPartitions(
      db,
      new Date(),
      config.POSTS_RETENTION_DAYS || undefined,
    )
    if (result.created.length + result.dropped.length > 0) log.info(result, 'partitions maintained')
  }
  const onError = (err: unknown) => log.warn({ err }, 'partition maintenance failed; will retry')
  let repeating: Repeating | undefined
  let first: Promise<void> | undefined
  return {
    ...service,
    async start() {
      await service.start()
      first = pass().catch(onError)
      repeating = repeatEvery(everyMs, pass, onError)
    },
    async close() {
      repeating?.stop()
      await first
      await lease.release()
      await closeRedis(redis)
      await service.close()
    },
  }
}
