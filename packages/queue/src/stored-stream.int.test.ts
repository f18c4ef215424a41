import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { publishStored, storedStreamKey, type StoredEntry } from './stored-stream.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('publishStored', () => {
  it('appends every entry in order with its fields, across script calls', async () => {
    const entries: StoredEntry[] = Array.from({ length: 1_203 }, (_, i) => ({
      type: i % 100 === 0 ? 'user_change' : 'post',
      id: String(10n ** 18n + BigInt(i)),
      // ASCII bodies beside non-ASCII ones (each travels as its own bytes).
      body: JSON.stringify({
        data: { id: String(i), text: i % 3 === 0 ? `plain "${i}"` : `héllo 🧵 "${i}"\\n` },
      }),
    }))
    await publishStored(env.redis, env.prefix, entries.slice(0, 3), 60_000)
    // A body may be given as its UTF-8 bytes (as the writer does); it reads back as the same text.
    await publishStored(
      env.redis,
      env.prefix,
      entries.slice(3).map((e, i) => (i % 2 === 0 ? { ...e, body: Buffer.from(e.body) } : e)),
      60_000,
    )
    const stored = await env.redis.xrange(storedStreamKey(env.prefix), '-', '+')
    expect(stored.map(([, f]) => ({ type: f[1], id: f[3], body: f[5] }))).toEqual(entries)
    expect(stored.map(([, f]) => [f[0], f[2], f[4]])).toEqual(
      entries.map(() => ['type', 'id', 'body']),
    )
  })
})
