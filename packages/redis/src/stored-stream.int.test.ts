import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { rangeStored } from './stored-reader.js'
import {
  publishStored,
  STORED_PACK,
  storedStreamKey,
  unpackStored,
  type StoredEntry,
} from './stored-stream.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('publishStored', () => {
  it('appends every entry in order, packed STORED_PACK to a stream entry', async () => {
    const entries: StoredEntry[] = Array.from({ length: 1_203 }, (_, i) => ({
      type: i % 100 === 0 ? 'user_change' : 'post',
      id: String(10n ** 18n + BigInt(i)),
      // ASCII bodies beside non-ASCII ones (each travels as its own bytes).
      body: JSON.stringify({
        data: { id: String(i), text: i % 3 === 0 ? `plain "${i}"` : `héllo 🧵 "${i}"\\n` },
      }),
    }))
    await publishStored(env.redis, env.prefix, entries.slice(0, 3), 60_000)
    await publishStored(env.redis, env.prefix, entries.slice(3), 60_000)
    const stored = await env.redis.xrange(storedStreamKey(env.prefix), '-', '+')
    expect(stored.flatMap(([, f]) => unpackStored(f))).toEqual(entries)
    // 3 in one stream entry, then 1,200 in 12, each a field `<type>:<id>` and its body.
    expect(stored.map(([, f]) => f.length / 2)).toEqual([3, ...Array(12).fill(STORED_PACK)])
    expect(stored[0]![1][0]).toBe(`${entries[0]!.type}:${entries[0]!.id}`)
    // The reader's pages hold the same entries, each with the id of the stream entry holding it.
    const pages: Array<StoredEntry & { streamId: string }> = []
    for await (const page of rangeStored(env.redis, env.prefix, 0, '+', 250)) pages.push(...page)
    expect(pages.map(({ streamId: _, ...e }) => e)).toEqual(entries)
    expect(new Set(pages.map((p) => p.streamId))).toEqual(new Set(stored.map(([id]) => id)))
  })

  it('skips a field of another form', () => {
    expect(unpackStored(['other:4', '{}', 'post:5', '{"b":2}', 'type', 'post'])).toEqual([
      { type: 'post', id: '5', body: '{"b":2}' },
    ])
  })
})
