import { setFlagsFromString } from 'node:v8'
import { runInNewContext } from 'node:vm'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { tailStream } from './tail-stream.js'

// A full collection on demand, to see what the tail still holds.
setFlagsFromString('--expose-gc')
const gc = runInNewContext('gc') as () => void

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('tailStream over Redis', () => {
  it('holds nothing it handed over: a tail that follows a stream for hours does not grow', async () => {
    const key = `${env.prefix}:tail-memory`
    const handed: WeakRef<object>[] = []
    const tail = tailStream(env.redis, key, {
      name: 'tail-memory',
      count: 10,
      blockMs: 200,
      onEntries: (raw) => {
        handed.push(new WeakRef(raw))
      },
    })
    try {
      await tail.ready
      // One read each: every entry is its own reply.
      for (let i = 1; i <= 20; i++) {
        await env.redis.xadd(key, '*', 'body', 'x'.repeat(1_000))
        await waitFor(`read ${i} handed over`, () => handed.length >= i)
      }
      gc()
      // A turn of the event loop lets the loop's locals go; then collect again.
      await new Promise((r) => setImmediate(r))
      gc()
      const alive = handed.filter((ref) => ref.deref() !== undefined).length
      // The read in hand may still be referenced; the nineteen before it must be gone. Raced
      // against one promise of the close, every reply stayed reachable until the tail closed.
      expect(alive).toBeLessThanOrEqual(1)
    } finally {
      await tail.close()
    }
  })
})
