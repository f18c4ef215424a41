import { randomUUID } from 'node:crypto'
import type { Redis } from './connection.js'
import type { Logger } from '@threadline/logger'

// Compare-and-act scripts: only the holder's token may extend or delete the key.
const RENEW = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end`
const RELEASE = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end`

export interface LeaseOptions {
  /** How long the lease lives without renewal: a dead holder is replaced after at most this. */
  ttlMs: number
  /** How often the holder renews, and how often a waiter tries again (default ttlMs / 3). */
  renewMs?: number
  logger?: Logger
}

export interface Lease {
  /** True while this process holds the lease (as far as it can know: see `onLost`). */
  readonly held: boolean
  readonly token: string
  /** One attempt: SET NX PX. */
  tryAcquire(): Promise<boolean>
  /** Tries until it holds the lease (true) or `signal` aborts (false). Redis errors are retried. */
  acquire(signal?: AbortSignal): Promise<boolean>
  /** Called when a held lease is lost (another holder, or no renewal for a whole ttl). */
  onLost(fn: () => void): () => void
  /** Gives the lease up (only if this process still holds it) and stops renewing. */
  release(): Promise<void>
}

/**
 * A Redis lock with a lease, for "exactly one replica does this" roles such as the ingest's
 * upstream connection. The holder renews every `renewMs`; if it cannot renew for a whole `ttlMs`
 * it must assume another replica has taken over, so it reports the loss and stops acting.
 */
export function createLease(redis: Redis, key: string, options: LeaseOptions): Lease {
  const token = randomUUID()
  const ttlMs = options.ttlMs
  const renewMs = options.renewMs ?? Math.max(50, Math.floor(ttlMs / 3))
  const log = options.logger?.child({ component: 'lease', key })
  const listeners = new Set<() => void>()
  let held = false
  let validUntil = 0
  let timer: NodeJS.Timeout | undefined

  const lose = (why: string) => {
    if (!held) return
    held = false
    clearInterval(timer)
    timer = undefined
    log?.warn({ why }, 'lease lost')
    for (const fn of listeners) fn()
  }

  const renew = async () => {
    const sentAt = Date.now()
    try {
      const ok = (await redis.eval(RENEW, 1, key, token, String(ttlMs))) as number
      if (!held) return
      if (ok === 1) validUntil = sentAt + ttlMs
      else lose('another holder has the lease')
    } catch (err) {
      log?.warn({ err }, 'lease renewal failed')
      if (Date.now() >= validUntil) lose('could not renew within the lease time')
    }
  }

  const tryAcquire = async (): Promise<boolean> => {
    if (held) return true
    const sentAt = Date.now()
    const ok = await redis.set(key, token, 'PX', ttlMs, 'NX')
    if (ok !== 'OK') return false
    held = true
    validUntil = sentAt + ttlMs
    timer = setInterval(() => {
      if (Date.now() >= validUntil) lose('lease time passed without renewal')
      else void renew()
    }, renewMs)
    log?.info('lease acquired')
    return true
  }

  return {
    get held() {
      return held
    },
    token,
    tryAcquire,
    async acquire(signal) {
      while (!signal?.aborted) {
        try {
          if (await tryAcquire()) return true
        } catch (err) {
          log?.warn({ err }, 'lease attempt failed')
        }
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, renewMs)
          function done() {
            clearTimeout(t)
            signal?.removeEventListener('abort', done)
            resolve()
          }
          signal?.addEventListener('abort', done, { once: true })
        })
      }
      return false
    },
    onLost(fn) {
      listeners.add(fn)
      return () => listeners.delete(fn)
    },
    async release() {
      clearInterval(timer)
      timer = undefined
      if (!held) return
      held = false
      try {
        await redis.eval(RELEASE, 1, key, token)
      } catch (err) {
        log?.warn({ err }, 'lease release failed; it lapses after its ttl')
      }
    },
  }
}
