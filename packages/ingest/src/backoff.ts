/** How long to wait before reconnecting to the filtered stream, as X's integration guide advises. */
export interface BackoffPolicy {
  /** Network errors (and stalls): linear steps of this much… */
  networkStepMs: number
  /** …up to this. */
  networkMaxMs: number
  /** HTTP errors: exponential from this… */
  httpMs: number
  /** …up to this. */
  httpMaxMs: number
  /** 429: exponential from this (unless the upstream says when its window resets)… */
  rateLimitMs: number
  /** …up to this; also caps a wait until x-rate-limit-reset. */
  rateLimitMaxMs: number
}

export const X_BACKOFF: BackoffPolicy = {
  networkStepMs: 250,
  networkMaxMs: 16_000,
  httpMs: 5_000,
  httpMaxMs: 320_000,
  rateLimitMs: 60_000,
  rateLimitMaxMs: 960_000,
}

export type ConnectFailure =
  | { kind: 'network' }
  | { kind: 'http'; status: number }
  /** `resetAt`: x-rate-limit-reset in epoch milliseconds, when the upstream sent it. */
  | { kind: 'rate-limit'; resetAt?: number }

/** Consecutive failures per kind since the last good connection. */
export interface BackoffState {
  network: number
  http: number
  rateLimit: number
}

export const INITIAL_BACKOFF: BackoffState = { network: 0, http: 0, rateLimit: 0 }

/**
 * The wait before the next attempt after `failure`, and the state after it. Pure: the caller owns
 * the clock (`now`) and resets the state to INITIAL_BACKOFF after a good connection.
 */
export function nextBackoff(
  state: BackoffState,
  failure: ConnectFailure,
  policy: BackoffPolicy,
  now: number,
): { delayMs: number; state: BackoffState } {
  switch (failure.kind) {
    case 'network': {
      const n = state.network + 1
      return {
        delayMs: Math.min(policy.networkMaxMs, policy.networkStepMs * n),
        state: { ...state, network: n },
      }
    }
    case 'http': {
      const n = state.http + 1
      return {
        delayMs: Math.min(policy.httpMaxMs, policy.httpMs * 2 ** (n - 1)),
        state: { ...state, http: n },
      }
    }
    case 'rate-limit': {
      const n = state.rateLimit + 1
      const exponential = Math.min(policy.rateLimitMaxMs, policy.rateLimitMs * 2 ** (n - 1))
      // The upstream's own word on when its window resets beats a guess.
      const untilReset =
        failure.resetAt !== undefined && failure.resetAt > now
          ? Math.min(policy.rateLimitMaxMs, failure.resetAt - now)
          : undefined
      return { delayMs: untilReset ?? exponential, state: { ...state, rateLimit: n } }
    }
  }
}
