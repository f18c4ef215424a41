import { describe, expect, it } from 'vitest'
import { silentLogger } from '@threadline/logger'
import { Batcher } from './batcher.js'

describe('Batcher', () => {
  it('hands on a full batch at once and a partial one after the time bound', async () => {
    const batches: string[][] = []
    const b = new Batcher(
      async (lines) => void batches.push(lines),
      { maxItems: 3, maxMs: 20 },
      silentLogger(),
    )
    for (const l of ['a', 'b', 'c', 'd']) await b.add(l)
    expect(batches).toEqual([['a', 'b', 'c']])
    await new Promise<void>((resolve) => {
      const check = () => (batches.length === 2 ? resolve() : setTimeout(check, 5))
      check()
    })
    expect(batches).toEqual([['a', 'b', 'c'], ['d']])
    await b.close(100)
  })

  it('holds the caller while the sink fails, then hands the same batch on, in order', async () => {
    const batches: string[][] = []
    let failures = 2
    const b = new Batcher(
      async (lines) => {
        if (failures-- > 0) throw new Error('Redis is down')
        batches.push(lines)
      },
      { maxItems: 2, maxMs: 1_000, retryMs: 1 },
      silentLogger(),
    )
    await b.add('a')
    let returned = false
    const second = b.add('b').then(() => (returned = true))
    // The full batch is being retried: the caller is held, and nothing is held beyond the batch.
    expect(returned).toBe(false)
    await second
    expect(batches).toEqual([['a', 'b']])
    expect(b.pending).toBe(0)
    await b.close(100)
  })

  it('closes a batch at the byte bound', async () => {
    const batches: string[][] = []
    const b = new Batcher(
      async (lines) => void batches.push(lines),
      { maxItems: 100, maxMs: 1_000, maxBytes: 10 },
      silentLogger(),
    )
    for (const l of ['aaaa', 'bbbb', 'cccc', 'dd']) await b.add(l)
    expect(batches).toEqual([['aaaa', 'bbbb', 'cccc']])
    await b.close(100)
    expect(batches).toEqual([['aaaa', 'bbbb', 'cccc'], ['dd']])
  })
})
