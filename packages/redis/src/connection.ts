import { Cluster, Redis as SingleRedis, type ClusterOptions, type RedisOptions } from 'ioredis'

/**
 * A connection to one Redis server or to a Redis Cluster. Everything in this package takes either;
 * the name stays `Redis` because services already pass it around under that name.
 */
export type Redis = SingleRedis | Cluster
export type { Cluster }

/** A cluster seed: any reachable node; the client discovers the rest (CLUSTER SLOTS). */
export interface ClusterNode {
  host: string
  port: number
}

/**
 * Where Redis is, as configuration gives it: with `REDIS_CLUSTER_NODES` set, a cluster reached
 * through those seeds (REDIS_URL then only lends its credentials and TLS); otherwise REDIS_URL.
 */
export interface RedisSettings {
  REDIS_URL: string
  REDIS_CLUSTER_NODES?: readonly ClusterNode[] | undefined
}

export type RedisRole = 'worker' | 'producer'

const retryStrategy = (times: number) => Math.min(times * 200, 5_000)

/**
 * Workers (and anything that blocks on Redis) reconnect forever: `maxRetriesPerRequest: null` is
 * what BullMQ requires of them. Producers fail fast instead, so that a caller (the ingest, an import)
 * sees Redis is gone and stops reading rather than buffering without bound.
 */
function roleOptions(role: RedisRole): RedisOptions {
  return role === 'worker'
    ? { maxRetriesPerRequest: null, enableReadyCheck: true }
    : { maxRetriesPerRequest: 2, enableOfflineQueue: true }
}

/** Credentials and TLS of a redis:// or rediss:// URL, for the nodes of a cluster. */
function urlAuth(url: string): Pick<RedisOptions, 'username' | 'password' | 'tls'> {
  const u = new URL(url)
  return {
    username: u.username ? decodeURIComponent(u.username) : undefined,
    password: u.password ? decodeURIComponent(u.password) : undefined,
    tls: u.protocol === 'rediss:' ? {} : undefined,
  }
}

/** The options of a cluster client for a role. */
export function clusterOptions(url: string, role: RedisRole, name?: string): ClusterOptions {
  const perRole = roleOptions(role)
  return {
    clusterRetryStrategy: retryStrategy,
    // A node's connection that drops is opened again (not only on the next MOVED), so a restarted
    // node without slot changes is used again.
    clusterNodeRetryStrategy: retryStrategy,
    enableOfflineQueue: true,
    enableReadyCheck: true,
    // Slots move during resharding and failover: follow MOVED/ASK, and wait out a failover.
    maxRedirections: 16,
    retryDelayOnFailover: 200,
    retryDelayOnClusterDown: 300,
    retryDelayOnTryAgain: 100,
    redisOptions: {
      ...urlAuth(url),
      connectionName: name ? `threadline:${name}` : undefined,
      maxRetriesPerRequest: perRole.maxRetriesPerRequest,
    },
  }
}

/**
 * A connection for a role. `target` is a redis URL, or the configuration (REDIS_URL and
 * REDIS_CLUSTER_NODES): with cluster nodes given, the result is an ioredis Cluster.
 */
export function createRedis(target: string | RedisSettings, role: RedisRole, name?: string): Redis {
  const url = typeof target === 'string' ? target : target.REDIS_URL
  const nodes = typeof target === 'string' ? undefined : target.REDIS_CLUSTER_NODES
  if (nodes && nodes.length > 0) {
    return new Cluster(
      nodes.map((n) => ({ host: n.host, port: n.port })),
      clusterOptions(url, role, name),
    )
  }
  const options: RedisOptions = {
    connectionName: name ? `threadline:${name}` : undefined,
    retryStrategy,
    ...roleOptions(role),
  }
  return new SingleRedis(url, options)
}

/** True for a Redis Cluster client. */
export function isCluster(redis: Redis): redis is Cluster {
  return redis.isCluster
}

/**
 * A new connection to the same Redis (or cluster) that waits forever for a reconnect, for blocking
 * reads (XREAD BLOCK holds its connection). ioredis' own `duplicate` takes different arguments for
 * a cluster, hence this.
 */
export function duplicateRedis(redis: Redis, name: string): Redis {
  if (isCluster(redis)) {
    return redis.duplicate([], {
      redisOptions: {
        ...redis.options.redisOptions,
        connectionName: `threadline:${name}`,
        maxRetriesPerRequest: null,
      },
    })
  }
  return redis.duplicate({ maxRetriesPerRequest: null, connectionName: `threadline:${name}` })
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

/**
 * Throws the first error among a pipeline's or transaction's replies (ioredis resolves `exec` with
 * an `[error, result]` pair a command instead of rejecting).
 */
export function throwFirstError(replies: ReadonlyArray<[Error | null, unknown]>): void {
  const failed = replies.find(([err]) => err)
  if (failed) throw failed[0]
}

/**
 * Deletes every key under `<prefix>:` (a test's or a benchmark's keys), scanning each server of
 * a cluster; keys go one UNLINK each, in pipelines, since a cluster refuses multi-key commands
 * across slots.
 */
export async function deleteByPrefix(redis: Redis, prefix: string): Promise<void> {
  const servers = isCluster(redis) ? redis.nodes('master') : [redis]
  for (const server of servers) {
    let cursor = '0'
    do {
      const [next, keys] = await server.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000)
      if (keys.length > 0) await server.pipeline(keys.map((k) => ['unlink', k])).exec()
      cursor = next
    } while (cursor !== '0')
  }
}
