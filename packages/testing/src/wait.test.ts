import { describe, expect, it } from 'vitest'
import { waitFor, waitForValue, type Check } from './wait.js'

describe('waitFor', () => {
  it('is done only when the check returns true', async () => {
    let n = 0
    await waitFor('n to reach 3', () => ++n >= 3, { intervalMs: 1 })
    expect(n).toBe(3)
  })

  it('takes a string as a reason to keep waiting, and names the last one on timeout', async () => {
    let n = 0
    await expect(
      waitFor('nothing missing', () => `${++n} missing`, { timeoutMs: 30, intervalMs: 5 }),
    ).rejects.toThrow(/waiting for nothing missing \(last: \d+ missing\)/)
    expect(n).toBeGreaterThan(1)
  })

  it('refuses a check that returns anything else (a count would pass while empty)', async () => {
    for (const value of [0, 7, { rows: [] }, null]) {
      const check = (() => value) as unknown as Check
      await expect(waitFor('a count', check)).rejects.toThrow(/returned .*return true/)
    }
  })

  it('times out with the last error seen', async () => {
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

describe('waitForValue', () => {
  it('returns the first object, waiting through undefined and errors', async () => {
    let n = 0
    const got = await waitForValue(
      'the third try',
      () => {
        n += 1
        if (n === 1) throw new Error('not yet')
        return n >= 3 ? { n } : undefined
      },
      { intervalMs: 1 },
    )
    expect(got).toEqual({ n: 3 })
  })

  it('refuses a value that is not an object, so a reason cannot pass as one', async () => {
    const get = (() => '2 missing') as unknown as () => object
    await expect(waitForValue('rows', get)).rejects.toThrow(/not an object/)
  })
})
