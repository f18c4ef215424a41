import { describe, expect, it } from 'vitest'
import { coalesced } from './coalesce.js'

describe('coalesced', () => {
  it('gives a caller joining a periodic pass a pass with its own, smaller minimum age', async () => {
    const ages: number[] = []
    let release!: () => void
    const first = new Promise<void>((r) => (release = r))
    const relay = coalesced(async (age) => {
      ages.push(age)
      if (ages.length === 1) await first
      return 1
    })
    const periodic = relay(5_000)
    const explicit = relay(0)
    const another = relay(5_000)
    release()
    expect(await explicit).toBe(2)
    expect(await periodic).toBe(2)
    expect(await another).toBe(2)
    expect(ages).toEqual([5_000, 0])
  })

  it('runs again after a pass ends, and one pass when nobody joins', async () => {
    const ages: number[] = []
    const relay = coalesced(async (age) => {
      ages.push(age)
      return 3
    })
    expect(await relay(5_000)).toBe(3)
    expect(await relay()).toBe(3)
    expect(ages).toEqual([5_000, 0])
  })
})
