import type { Redis } from './connection.js'
import { scriptCommand } from './script.js'

export interface RateLimitResult {
  limit: number
  remaining: number
  /** Unix seconds at which the current window ends. */
  reset: number
  allowed: boolean
}

/**
 * One round trip: count the requests in the window's key and give it an expiry the first time.
 * The window is fixed (aligned to multiples of its length), so every replica agrees on it.
 */
const SCRIPT = `
local n = redis.call('INCRBY', KEYS[1], ARGV[2])
if n == tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return n`

interface WindowState {
  start: number
  /** The highest count Redis has answered for this window. */
  known: number
  /** Requests let through whose increment Redis has not confirmed yet. */
  pending: number
  /** Requests let through whose increment has not been sent yet (sent together, shortly). */
  unsent: number
  flushing: boolean
}

/** Increments of one key made within this long travel to Redis as one INCRBY. */
const FLUSH_MS = 20

/**
 * Fixed-window rate limits per subject (token) and endpoint, shared by every replica through
 * Redis: keys `<prefix>:rl:<endpoint>:<subject>:<window start>`, expiring with their window.
 *
 * The first request of a window in this process waits for Redis (one round trip). After that the
 * process knows the count: a request is decided at once from the last count Redis gave plus the
 * increments not yet confirmed, and its own increment goes to Redis without being waited for,
 * together with the others of the next few milliseconds (one INCRBY per key per FLUSH_MS, not one
 * call per request: at thousands of requests per second the per-request call cost as much CPU as
 * the request). A single replica is therefore exact; several replicas may together let through at
 * most their unconfirmed requests beyond the limit. A window known to be spent costs no Redis call.
 */
export function createRateLimiter(
  redis: Redis,
  { prefix, windowMs = 15 * 60_000 }: { prefix: string; windowMs?: number },
) {
  const rateLimit = scriptCommand<number>(redis, 'threadlineRateLimit', SCRIPT)
  const states = new Map<string, WindowState>()
  let onError: (err: unknown) => void = () => undefined

  const send = (key: string, state: WindowState, end: number, now: number, by: number) =>
    rateLimit(`${prefix}:rl:${key}:${state.start}`, String(end - now + 1_000), String(by))
      .then((count) => {
        state.known = Math.max(state.known, count)
        return count
      })
      .finally(() => {
        state.pending -= by
      })

  const flushLater = (key: string, state: WindowState, end: number) => {
    if (state.flushing) return
    state.flushing = true
    setTimeout(() => {
      state.flushing = false
      const by = state.unsent
      if (by === 0) return
      state.unsent = 0
      state.pending += by
      send(key, state, end, Date.now(), by).catch(onError)
    }, FLUSH_MS).unref()
  }

  const result = (limit: number, count: number, end: number): RateLimitResult => ({
    limit,
    remaining: Math.max(0, limit - count),
    reset: Math.ceil(end / 1000),
    allowed: count <= limit,
  })

  /**
   * Counts one request, deciding at once when this process already knows the window's count:
   * then it returns the result itself (no promise, no Redis round trip waited for); otherwise
   * undefined, and the caller must use hit().
   */
  const hitKnown = (
    endpoint: string,
    subject: string,
    limit: number,
    now = Date.now(),
  ): RateLimitResult | undefined => {
    const start = now - (now % windowMs)
    const state = states.get(`${endpoint}:${subject}`)
    if (!state || state.start !== start) return undefined
    const end = start + windowMs
    const count = state.known + state.pending + state.unsent + 1
    if (count > limit) return result(limit, count, end)
    state.unsent += 1
    flushLater(`${endpoint}:${subject}`, state, end)
    return result(limit, count, end)
  }

  return {
    windowMs,
    /** Where failures of the background increments are reported (they never reject a request). */
    onError(fn: (err: unknown) => void) {
      onError = fn
    },
    hitKnown,
    async hit(
      endpoint: string,
      subject: string,
      limit: number,
      now = Date.now(),
    ): Promise<RateLimitResult> {
      const known = hitKnown(endpoint, subject, limit, now)
      if (known) return known
      const start = now - (now % windowMs)
      const end = start + windowMs
      const key = `${endpoint}:${subject}`
      if (states.size >= 50_000) {
        for (const [k, s] of states) if (s.start !== start) states.delete(k)
      }
      const state: WindowState = { start, known: 0, pending: 1, unsent: 0, flushing: false }
      states.set(key, state)
      return result(limit, await send(key, state, end, now, 1), end)
    },
  }
}

export type RateLimiter = ReturnType<typeof createRateLimiter>
