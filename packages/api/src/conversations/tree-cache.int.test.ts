import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import {
  createTestEnv,
  generateConversation,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { storeLines } from '@threadline/testing/api'
import { createTreeCache } from './tree-cache.js'

// The tree cache over a real store (docs/api.md §5): a held tree is served while a newer one is
// read, no longer than the staleness bound, and concurrent reads of one conversation share a read.

let env: TestEnv
const conv = generateConversation({ size: 40, seed: 5 })
const first = conv.lines.slice(0, 30)
/** The clock the cache reads; each test moves it by hand. */
let clock = 0
const MAX_STALE_MS = 400
const cache = () => createTreeCache({ maxStaleMs: MAX_STALE_MS, now: () => clock })

beforeAll(async () => {
  env = await createTestEnv()
  await storeLines(env.db, first)
})
afterAll(() => env?.close())

describe('createTreeCache', () => {
  it('serves the held tree while a newer one is read, within the bound', async () => {
    const trees = cache()
    const before = await trees.get(env.db, conv.rootId, 'oldest')
    expect(before.size).toBe(30)
    await storeLines(env.db, conv.lines.slice(30, 35))
    clock += MAX_STALE_MS
    // Last known current at its read, MAX_STALE_MS ago: served as it is, the newer one read.
    expect(await trees.get(env.db, conv.rootId, 'oldest')).toBe(before)
    const after = await waitForValue('the newer tree held', async () => {
      const tree = await trees.get(env.db, conv.rootId, 'oldest')
      return tree.size === 35 ? tree : undefined
    })
    expect(after.tree('oldest').size).toBe(35)
    expect(Number(after.version)).toBeGreaterThan(Number(before.version))
  })

  it('waits for the newer tree once the held one is staler than the bound', async () => {
    const trees = cache()
    const before = await trees.get(env.db, conv.rootId, 'oldest')
    await storeLines(env.db, conv.lines.slice(35, 38))
    clock += MAX_STALE_MS + 1
    const after = await trees.get(env.db, conv.rootId, 'oldest')
    expect(after.size).toBe(before.size + 3)
  })

  it('reads a changed conversation once for concurrent requests', async () => {
    const trees = cache()
    const before = await trees.get(env.db, conv.rootId, 'newest')
    await storeLines(env.db, conv.lines.slice(38))
    clock += MAX_STALE_MS + 1
    const answers = await Promise.all(
      Array.from({ length: 5 }, () => trees.get(env.db, conv.rootId, 'newest')),
    )
    expect(answers[0]!.size).toBe(40)
    for (const answer of answers) expect(answer).toBe(answers[0])
    expect(answers[0]).not.toBe(before)
    // While nothing changes, the held tree is served however much time passes.
    clock += 60_000
    expect(await trees.get(env.db, conv.rootId, 'newest')).toBe(answers[0])
  })

  it('reads a changed conversation again only once the read interval is over', async () => {
    const third = generateConversation({ size: 20, seed: 8, startMs: Date.UTC(2026, 9, 2) })
    await storeLines(env.db, third.lines.slice(0, 10))
    const trees = createTreeCache({
      maxStaleMs: MAX_STALE_MS,
      minReadIntervalMs: 200,
      now: () => clock,
    })
    const before = await trees.get(env.db, third.rootId, 'oldest')
    await storeLines(env.db, third.lines.slice(10))
    clock += 199
    // Each answer checks the version (a query): a read of these 20 Posts started by the first
    // would have been held long before the last.
    for (let i = 0; i < 50; i++) {
      expect(await trees.get(env.db, third.rootId, 'oldest')).toBe(before)
    }
    clock += 1
    const after = await waitForValue('the newer tree held', async () => {
      const tree = await trees.get(env.db, third.rootId, 'oldest')
      return tree.size === 20 ? tree : undefined
    })
    expect(after.tree('oldest').size).toBe(20)
  })

  it('holds no more Posts than its bound, the least recently read going first', async () => {
    const other = generateConversation({ size: 20, seed: 6, startMs: Date.UTC(2026, 9, 1) })
    await storeLines(env.db, other.lines)
    const trees = createTreeCache({ maxPosts: 50, now: () => clock })
    await trees.get(env.db, conv.rootId, 'oldest')
    expect(trees.held()).toBe(40)
    await trees.get(env.db, other.rootId, 'oldest')
    expect(trees.held()).toBe(20)
  })
})
