import { afterEach, describe, expect, it, vi } from 'vitest'
import { repeatEvery } from './index.js'

afterEach(() => {
  vi.useRealTimers()
})

describe('repeatEvery', () => {
  it('runs a task every interval after the last run ended, past failures, until stopped', async () => {
    vi.useFakeTimers()
    const errors: unknown[] = []
    let runs = 0
    let release: () => void = () => {}
    const task = () => {
      runs += 1
      if (runs === 2) return Promise.reject(new Error('boom'))
      // The third run is slow: no fourth may start before it ends.
      if (runs === 3) return new Promise<void>((r) => (release = r))
      return Promise.resolve()
    }
    const repeating = repeatEvery(100, task, (err) => errors.push(err))
    expect(runs).toBe(0)
    await vi.advanceTimersByTimeAsync(100)
    expect(runs).toBe(1)
    await vi.advanceTimersByTimeAsync(200)
    expect(runs).toBe(3)
    expect(errors).toEqual([new Error('boom')])
    await vi.advanceTimersByTimeAsync(1_000)
    expect(runs).toBe(3)
    release()
    await vi.advanceTimersByTimeAsync(100)
    expect(runs).toBe(4)
    repeating.stop()
    await vi.advanceTimersByTimeAsync(1_000)
    expect(runs).toBe(4)
  })
})
