import type { Logger } from '@threadline/logger'
import { UpstreamHttpError, type Page, type RateLimit } from './upstream.js'

export interface PacerOptions {
  /** First wait after a 429 without a reset time; doubles per repeat. */
  rateLimitBackoffMs: number
  /** The longest single wait on rate limits. */
  maxWaitMs: number
}

/** Waits `ms`, or rejects at once when `signal` aborts (the job then resumes from its progress). */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(new Error('closing'))
    const done = () => {
      signal.removeEventListener('abort', abort)
      resolve()
    }
    const abort = () => {
      clearTimeout(timer)
      reject(new Error('closing'))
    }
    const timer = setTimeout(done, ms)
    signal.addEventListener('abort', abort, { once: true })
  })
}

/**
 * Keeps the upstream calls of one process within the upstream's rate limits: it remembers the
 * last `x-rate-limit-*` headers per endpoint, waits for the reset when a window is spent, and
 * backs off on a 429. Shared by conversation backfills and window recovery, which spend the same
 * search window.
 */
export class UpstreamPacer {
  private readonly limits = new Map<string, RateLimit>()
  private readonly log: Logger

  constructor(
    private readonly options: PacerOptions,
    logger: Logger,
  ) {
    this.log = logger.child({ component: 'pacer' })
  }

  async call(endpoint: string, fn: () => Promise<Page>, signal: AbortSignal): Promise<Page> {
    const { rateLimitBackoffMs, maxWaitMs } = this.options
    for (let limited = 0; ;) {
      const known = this.limits.get(endpoint)
      if (known?.remaining === 0 && known.resetAt !== undefined && known.resetAt > Date.now()) {
        const wait = Math.min(maxWaitMs, known.resetAt - Date.now())
        this.log.info({ endpoint, wait }, 'rate limit spent; waiting for its reset')
        await sleep(wait, signal)
        this.limits.delete(endpoint)
      }
      try {
        const page = await fn()
        this.limits.set(endpoint, page.rateLimit)
        return page
      } catch (err) {
        if (!(err instanceof UpstreamHttpError) || err.status !== 429) throw err
        limited += 1
        const reset = err.rateLimit.resetAt
        const wait = Math.min(
          maxWaitMs,
          reset !== undefined && reset > Date.now()
            ? reset - Date.now()
            : rateLimitBackoffMs * 2 ** (limited - 1),
        )
        this.log.info({ endpoint, wait, limited }, 'upstream answered 429; waiting')
        await sleep(wait, signal)
      }
    }
  }
}

/** A request the upstream refused as such (4xx other than 429): a retry would get the same. */
export function refusedForGood(err: unknown): err is UpstreamHttpError {
  return (
    err instanceof UpstreamHttpError && err.status >= 400 && err.status < 500 && err.status !== 429
  )
}
