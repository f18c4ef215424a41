import type { Redis } from './connection.js'

/** One server's `used_memory` against its `maxmemory` (0: no limit). */
export interface RedisMemory {
  used: number
  max: number
}

/** `used_memory` and `maxmemory` from the text of `INFO memory`. */
export function parseInfoMemory(info: string): RedisMemory {
  const field = (name: string) => Number(new RegExp(`^${name}:(\\d+)`, 'm').exec(info)?.[1] ?? 0)
  return { used: field('used_memory'), max: field('maxmemory') }
}

/**
 * How full Redis is, as the share of `maxmemory` in use on the fullest server (every master of a
 * cluster: one full node refuses the writes that hash to it); undefined when no server has a limit.
 */
export async function redisMemoryShare(redis: Redis): Promise<number | undefined> {
  const servers =
    'nodes' in redis && typeof redis.nodes === 'function' ? redis.nodes('master') : [redis]
  const readings = await Promise.all(
    servers.map(async (s) => parseInfoMemory(await s.info('memory'))),
  )
  const shares = readings.filter((r) => r.max > 0).map((r) => r.used / r.max)
  return shares.length > 0 ? Math.max(...shares) : undefined
}
