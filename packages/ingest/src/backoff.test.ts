import { describe, expect, it } from 'vitest'
import { INITIAL_BACKOFF, X_BACKOFF, nextBackoff, type ConnectFailure } from './backoff.js'

function delays(failures: ConnectFailure[], now = 0): number[] {
  let state = INITIAL_BACKOFF
  return failures.map((f) => {
    const next = nextBackoff(state, f, X_BACKOFF, now)
    state = next.state
    return next.delayMs
  })
}

describe('nextBackoff', () => {
  it('steps linearly by 250 ms up to 16 s on network errors', () => {
    const d = delays(Array.from({ length: 70 }, () => ({ kind: 'network' as const })))
    expect(d.slice(0, 4)).toEqual([250, 500, 750, 1_000])
    expect(d[63]).toBe(16_000)
    expect(d[69]).toBe(16_000)
  })

  it('doubles from 5 s up to 320 s on HTTP errors', () => {
    const d = delays(Array.from({ length: 9 }, () => ({ kind: 'http' as const, status: 503 })))
    expect(d).toEqual([5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 320_000, 320_000])
  })

  it('doubles from 60 s on 429 without a reset time', () => {
    const d = delays(Array.from({ length: 3 }, () => ({ kind: 'rate-limit' as const })))
    expect(d).toEqual([60_000, 120_000, 240_000])
  })

  it('waits until x-rate-limit-reset when the upstream gives it, within the cap', () => {
    const now = 1_000_000
    expect(
      nextBackoff(INITIAL_BACKOFF, { kind: 'rate-limit', resetAt: now + 7_000 }, X_BACKOFF, now)
        .delayMs,
    ).toBe(7_000)
    expect(
      nextBackoff(INITIAL_BACKOFF, { kind: 'rate-limit', resetAt: now + 10 ** 9 }, X_BACKOFF, now)
        .delayMs,
    ).toBe(X_BACKOFF.rateLimitMaxMs)
    // A reset already past is no information: fall back to the exponential wait.
    expect(
      nextBackoff(INITIAL_BACKOFF, { kind: 'rate-limit', resetAt: now - 1 }, X_BACKOFF, now)
        .delayMs,
    ).toBe(60_000)
  })

  it('counts each kind separately', () => {
    const d = delays([
      { kind: 'network' },
      { kind: 'http', status: 500 },
      { kind: 'network' },
      { kind: 'http', status: 500 },
    ])
    expect(d).toEqual([250, 5_000, 500, 10_000])
  })

  it('honours a shrunken policy (tests)', () => {
    const fast = { ...X_BACKOFF, httpMs: 10, httpMaxMs: 40 }
    let state = INITIAL_BACKOFF
    const out: number[] = []
    for (let i = 0; i < 4; i++) {
      const next = nextBackoff(state, { kind: 'http', status: 500 }, fast, 0)
      state = next.state
      out.push(next.delayMs)
    }
    expect(out).toEqual([10, 20, 40, 40])
  })
})
