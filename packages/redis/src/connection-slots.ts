import { randomUUID } from 'node:crypto'
import { isCluster, throwFirstError, type Redis } from './connection.js'
import type { Logger } from '@threadline/logger'

/*
 * A slot is a member of a sorted set scored by its expiry. Taking one drops the expired members
 * first, so the slots of a crashed instance free themselves after one ttl.
 */
const ACQUIRE = `
redis.call('zremrangebyscore', KEYS[1], '-inf', ARGV[1])
if redis.call('zcard', KEYS[1]) >= tonumber(ARGV[3]) then return 0 end
redis.call('zadd', KEYS[1], ARGV[2], ARGV[4])
redis.call('pexpire', KEYS[1], ARGV[5])
return 1`

export interface ConnectionSlotsOptions {
  /** Key prefix (the deployment's REDIS_PREFIX). */
  prefix: string
  /** A slot not refreshed for this long is free again (its instance died). */
  ttlMs?: number
  logger?: Logger
}

export interface ConnectionSlots {
  /**
   * Takes one of `limit` slots of `group` (an app's stream connections, say), counted across every
   * instance sharing the Redis. Resolves to a release function, or undefined when all are taken.
   */
  acquire(group: string, limit: number): Promise<(() => Promise<void>) | undefined>
  /** Stops refreshing; held slots lapse after the ttl unless released. */
  close(): void
}

/**
 * Connection limits shared by all API instances. Each instance refreshes the slots it holds every
 * third of the ttl, so a slot outlives a crash by at most one ttl, and a clean close frees it at once.
 */
export function createConnectionSlots(
  redis: Redis,
  options: ConnectionSlotsOptions,
): ConnectionSlots {
  const ttlMs = options.ttlMs ?? 30_000
  const log = options.logger?.child({ component: 'connection-slots' })
  const held = new Map<string, Set<string>>() // key → members
  const keyOf = (group: string) => `${options.prefix}:slots:${group}`

  const refresh = async () => {
    if (held.size === 0) return
    const expiry = Date.now() + ttlMs
    // A cluster pipeline must stay within one slot, and each group's key hashes on its own: there,
    // one pipeline per key (run together); on one server, one pipeline for all.
    const groups = isCluster(redis) ? [...held].map((entry) => [entry]) : [[...held]]
    const outcomes = await Promise.all(
      groups.map((entries) => {
        const pipeline = redis.pipeline()
        for (const [key, members] of entries) {
          for (const m of members) pipeline.zadd(key, 'XX', expiry, m)
          pipeline.pexpire(key, ttlMs * 2)
        }
        return pipeline.exec()
      }),
    )
    throwFirstError(outcomes.flatMap((results) => results ?? []))
  }
  const timer = setInterval(
    () => {
      refresh().catch((err: unknown) => log?.warn({ err }, 'refreshing connection slots failed'))
    },
    Math.max(50, Math.floor(ttlMs / 3)),
  )
  timer.unref()

  return {
    async acquire(group, limit) {
      const key = keyOf(group)
      const member = randomUUID()
      const now = Date.now()
      const ok = (await redis.eval(
        ACQUIRE,
        1,
        key,
        String(now),
        String(now + ttlMs),
        String(limit),
        member,
        String(ttlMs * 2),
      )) as number
      if (ok !== 1) return undefined
      let members = held.get(key)
      if (!members) held.set(key, (members = new Set()))
      members.add(member)
      let released = false
      return async () => {
        if (released) return
        released = true
        const set = held.get(key)
        set?.delete(member)
        if (set?.size === 0) held.delete(key)
        try {
          await redis.zrem(key, member)
        } catch (err) {
          // The slot lapses by itself after the ttl.
          log?.warn({ err, group }, 'releasing a connection slot failed')
        }
      }
    },
    close() {
      clearInterval(timer)
    },
  }
}
