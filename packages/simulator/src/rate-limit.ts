import type { ServerResponse } from 'node:http'

const WINDOW_MS = 15 * 60_000

/** X's rate limits: `limit` requests per key in each 15-minute window, told in its headers. */
export class RateLimits {
  private readonly windows = new Map<string, { used: number; resetMs: number }>()

  constructor(private readonly limit: number) {}

  /** Counts a request in `key`'s window and sets the x-rate-limit headers; false over the limit. */
  take(res: ServerResponse, key: string): boolean {
    const now = Date.now()
    let w = this.windows.get(key)
    if (!w || now >= w.resetMs) this.windows.set(key, (w = { used: 0, resetMs: now + WINDOW_MS }))
    w.used++
    res.setHeader('x-rate-limit-limit', String(this.limit))
    res.setHeader('x-rate-limit-remaining', String(Math.max(0, this.limit - w.used)))
    res.setHeader('x-rate-limit-reset', String(Math.ceil(w.resetMs / 1000)))
    return w.used <= this.limit
  }
}
