import { Redis, type RedisOptions } from 'ioredis'

export { Redis }

/**
 * Workers (and anything that blocks on Redis) reconnect forever: `maxRetriesPerRequest: null` is
 * what BullMQ requires of them. Producers fail fast instead, so that a caller (the ingest, an import)
 * sees Redis is gone and stops reading rather than buffering without bound.
 */
export function createRedis(url: string, role: 'worker' | 'producer', name?: string): Redis {
  const options: RedisOptions = {
    connectionName: name ? `threadline:${name}` : undefined,
    retryStrategy: (times) => Math.min(times * 200, 5_000),
    ...(role === 'worker'
      ? { maxRetriesPerRequest: null, enableReadyCheck: true }
      : { maxRetriesPerRequest: 2, enableOfflineQueue: true }),
  }
  return new Redis(url, options)
}

/** Resolves once the connection is ready, or rejects after `timeoutMs`. */
export async function waitForRedis(redis: Redis, timeoutMs = 10_000): Promise<void> {
  if (redis.status === 'ready') return
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => {
      cleanup()
      reject(new Error(`Redis did not answer within ${timeoutMs} ms`))
    }, timeoutMs)
    const onReady = () => {
      cleanup()
      resolve()
    }
    const cleanup = () => {
      clearTimeout(timer)
      redis.off('ready', onReady)
    }
    redis.on('ready', onReady)
  })
}

/** Closes a connection politely, or drops it if the server is gone. */
export async function closeRedis(redis: Redis): Promise<void> {
  if (redis.status === 'end') return
  try {
    await Promise.race([
      redis.quit(),
      new Promise((_, reject) => setTimeout(() => reject(new Error('quit timed out')), 2_000)),
    ])
  } catch {
    redis.disconnect()
  }
}
