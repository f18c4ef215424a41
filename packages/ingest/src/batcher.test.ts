import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { silentLogger } from '@threadline/logger'
import { Batcher, type BatcherOptions } from './batcher.js'

/** Every callback queued so far has run (microtasks and I/O callbacks): no clock involved. */
const settle = () => new Promise<void>((r) => setImmediate(r))

/** A batcher whose batches stay in flight until the test says they are done. */
function harness(options: BatcherOptions) {
  const batches: string[][] = []
  const finish: Array<() => void> = []
  const batcher = new Batcher<string>(
    async (lines) => {
      batches.push(lines)
      let done: () => void = () => {}
      const promise = new Promise<void>((r) => (done = r))
      finish.push(done)
      return { done: promise }
    },
    options,
    silentLogger(),
  )
  return { batches, finish, batcher }
}

describe('Batcher', () => {
  it('hands a line on at once when nothing is in flight', async () => {
    const { batches, batcher } = harness({ maxItems: 500 })
    await batcher.add('a')
    await settle()
    expect(batches).toEqual([['a']])
    expect(batcher.pending).toBe(0)
    expect(batcher.inFlightBatches).toBe(1)
    await batcher.close(100)
  })

  it('gathers while a batch is in flight and hands the gathered lines on when it is done', async () => {
    const { batches, finish, batcher } = harness({ maxItems: 500 })
    await batcher.add('a')
    await settle()
    for (const l of ['b', 'c', 'd']) await batcher.add(l)
    await settle()
    expect(batches).toEqual([['a']])
    expect(batcher.pending).toBe(3)
    finish[0]!()
    await settle()
    expect(batches).toEqual([['a'], ['b', 'c', 'd']])
    // Done with nothing gathered: the next line goes at once again.
    finish[1]!()
    await settle()
    expect(batcher.inFlightBatches).toBe(0)
    await batcher.add('e')
    await settle()
    expect(batches).toEqual([['a'], ['b', 'c', 'd'], ['e']])
    await batcher.close(100)
  })

  it('hands a gathering batch on when it reaches the line bound, in flight or not', async () => {
    const { batches, batcher } = harness({ maxItems: 3 })
    await batcher.add('a')
    for (const l of ['b', 'c', 'd', 'e']) await batcher.add(l)
    await settle()
    expect(batches).toEqual([['a'], ['b', 'c', 'd']])
    expect(batcher.pending).toBe(1)
    expect(batcher.inFlightBatches).toBe(2)
    await batcher.close(100)
  })

  it('hands a gathering batch on when it reaches the byte bound', async () => {
    const { batches, batcher } = harness({ maxItems: 100, maxBytes: 10 })
    for (const l of ['a', 'bbbb', 'cccc', 'dd', 'e']) await batcher.add(l)
    await settle()
    expect(batches).toEqual([['a'], ['bbbb', 'cccc', 'dd']])
    await batcher.close(100)
    expect(batches).toEqual([['a'], ['bbbb', 'cccc', 'dd'], ['e']])
  })

  it('lets maxInFlight batches go at once before gathering', async () => {
    const { batches, finish, batcher } = harness({ maxItems: 100, maxInFlight: 2 })
    for (const l of ['a', 'b', 'c', 'd']) {
      await batcher.add(l)
      await settle()
    }
    expect(batches).toEqual([['a'], ['b']])
    finish[1]!()
    await settle()
    expect(batches).toEqual([['a'], ['b'], ['c', 'd']])
    await batcher.close(100)
  })

  it('never holds a line while nothing is in flight, and hands every line on once, in order', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.oneof(fc.constant('add' as const), fc.nat({ max: 5 })), { maxLength: 60 }),
        fc.integer({ min: 1, max: 6 }),
        fc.integer({ min: 1, max: 3 }),
        async (ops, maxItems, maxInFlight) => {
          const { batches, finish, batcher } = harness({ maxItems, maxInFlight })
          const done = new Set<number>()
          let next = 0
          for (const op of ops) {
            if (op === 'add') await batcher.add(String(next++))
            else {
              // Finish one batch still in flight, if any (the op picks which).
              const open = finish.map((_, i) => i).filter((i) => !done.has(i))
              const pick = open[op % Math.max(1, open.length)]
              if (pick !== undefined) {
                done.add(pick)
                finish[pick]!()
              }
            }
            await settle()
            if (batcher.pending > 0)
              expect(batcher.inFlightBatches).toBeGreaterThanOrEqual(maxInFlight)
            for (const b of batches) expect(b.length).toBeLessThanOrEqual(maxItems)
          }
          await batcher.close(100)
          expect(batches.flat()).toEqual(Array.from({ length: next }, (_, i) => String(i)))
        },
      ),
      { numRuns: 100 },
    )
  })

  it('holds the caller while the sink fails, then hands the same batch on, in order', async () => {
    const batches: string[][] = []
    let failures = 2
    let release: () => void = () => {}
    const firstDone = new Promise<void>((r) => (release = r))
    const b = new Batcher(
      async (lines) => {
        if (batches.length === 0) {
          batches.push(lines)
          return { done: firstDone }
        }
        if (failures-- > 0) throw new Error('Redis is down')
        batches.push(lines)
      },
      { maxItems: 2, retryMs: 1 },
      silentLogger(),
    )
    await b.add('a')
    await settle()
    await b.add('b')
    let returned = false
    const second = b.add('c').then(() => (returned = true))
    // The full batch is being retried: the caller is held, and nothing is held beyond the batch.
    expect(returned).toBe(false)
    await second
    expect(batches).toEqual([['a'], ['b', 'c']])
    expect(b.pending).toBe(0)
    release()
    await b.close(100)
  })
})
