import type { AuthedApp } from './types.js'

/**
 * Queries started per second at most. A token seen for the first time waits for the next one, so
 * a flood of unknown tokens costs the database this many queries a second whatever its size.
 */
const QUERIES_PER_SECOND = 20
/** Tokens one query asks for (each an index probe). */
const BATCH = 500
/** Tokens waiting at once; past this a new one is refused as busy (503) rather than queued. */
const WAITING = 10_000

export class TokenLookupsBusyError extends Error {
  constructor() {
    super(`more than ${WAITING} bearer tokens are waiting to be looked up`)
    this.name = 'TokenLookupsBusyError'
  }
}

export interface TokenLookupStats {
  /** Queries sent to the database. */
  queries: number
  /** Tokens those queries asked for. */
  tokens: number
}

type Find = (tokens: string[]) => Promise<Map<string, AuthedApp>>
interface Waiter {
  resolve: (app: AuthedApp | undefined) => void
  reject: (err: unknown) => void
}

/**
 * Looks bearer tokens up in batches, one query in flight and at most `queriesPerSecond` started a
 * second: every token asked for meanwhile rides on the next query (docs/api.md §1.1).
 */
export function createTokenLookups(
  find: Find,
  { queriesPerSecond = QUERIES_PER_SECOND }: { queriesPerSecond?: number } = {},
) {
  const spacingMs = 1000 / queriesPerSecond
  const waiting = new Map<string, Waiter[]>()
  const stats: TokenLookupStats = { queries: 0, tokens: 0 }
  let running = false
  let timer: NodeJS.Timeout | undefined
  let lastStart = -Infinity

  const schedule = () => {
    if (running || timer || waiting.size === 0) return
    const delay = lastStart + spacingMs - performance.now()
    if (delay <= 0) void run()
    else timer = setTimeout(() => ((timer = undefined), void run()), delay)
  }

  const run = async () => {
    running = true
    lastStart = performance.now()
    const batch = new Map<string, Waiter[]>()
    for (const [token, waiters] of waiting) {
      if (batch.size >= BATCH) break
      batch.set(token, waiters)
      waiting.delete(token)
    }
    stats.queries += 1
    stats.tokens += batch.size
    try {
      const found = await find([...batch.keys()])
      for (const [token, waiters] of batch) for (const w of waiters) w.resolve(found.get(token))
    } catch (err) {
      for (const waiters of batch.values()) for (const w of waiters) w.reject(err)
    } finally {
      running = false
      schedule()
    }
  }

  return {
    /** The app of `token`, undefined when unknown; rejects with TokenLookupsBusyError when full. */
    lookup(token: string): Promise<AuthedApp | undefined> {
      const waiters = waiting.get(token)
      if (!waiters && waiting.size >= WAITING) return Promise.reject(new TokenLookupsBusyError())
      return new Promise((resolve, reject) => {
        if (waiters) waiters.push({ resolve, reject })
        else waiting.set(token, [{ resolve, reject }])
        schedule()
      })
    },
    stats: (): TokenLookupStats => ({ ...stats }),
  }
}
