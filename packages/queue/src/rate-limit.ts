import type { Redis } from 'ioredis'

export interface RateLimitResult {
  limit: number
  remaining: number
  /** Unix seconds at which the current window ends. */
  reset: number
  allowed: boolean
}

/**
 * One round trip: count the request in the window's key and give it an expiry the first time.
 * The window is fixed (aligned to multiples of its length), so every replica agrees on it.
 */
const SCRIPT = `
local n = redis.call('INCR', KEYS[1])
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`

type Limited = Redis & {
  threadlineRateLimit(key: string, ttlMs: string): Promise<number>
}

/**
 * Fixed-window rate limits per token and endpoint, kept in Redis so replicas share them. Keys are
 * `<prefix>:rl:<endpoint>:<token id>:<window start>` and expire with their window.
 */
export function createRateLimiter(
  redis: Redis,
  { prefix, windowMs = 15 * 60_000 }: { prefix: string; windowMs?: number },
) {
  const client = redis as Limited
  if (typeof client.threadlineRateLimit !== 'function') {
    client.defineCommand('threadlineRateLimit', { numberOfKeys: 1, lua: SCRIPT })
  }
  return {
    windowMs,
    async hit(
      endpoint: string,
      subject: string,
      limit: number,
      now = Date.now(),
    ): Promise<RateLimitResult> {
      const start = now - (now % windowMs)
      const end = start + windowMs
      const count = await client.threadlineRateLimit(
        `${prefix}:rl:${endpoint}:${subject}:${start}`,
        String(end - now + 1_000),
      )
      return {
        limit,
        remaining: Math.max(0, limit - count),
        reset: Math.ceil(end / 1000),
        allowed: count <= limit,
      }
    },
  }
}

export type RateLimiter = ReturnType<typeof createRateLimiter>
