import { describe, expect, it } from 'vitest'
import { waitFor } from './wait.js'

describe('waitFor', () => {
  it('returns the first value that is neither undefined nor false', async () => {
    let n = 0
    await expect(
      waitFor('n to reach 3', () => ++n >= 3 && 'done', { intervalMs: 1 }),
    ).resolves.toBe('done')
    expect(n).toBe(3)
    await expect(waitFor('a positive number', () => 7)).resolves.toBe(7)
  })

  it('refuses a check that returns 0 (a count would pass while empty)', async () => {
    await expect(waitFor('a count', () => 0)).rejects.toThrow(/returned 0/)
  })

  it('times out with the last value or error seen', async () => {
    await expect(
      waitFor(
        'never',
        () => {
          throw new Error('still down')
        },
        { timeoutMs: 20, intervalMs: 5 },
      ),
    ).rejects.toThrow(/waiting for never \(last: Error: still down\)/)
  })
})
