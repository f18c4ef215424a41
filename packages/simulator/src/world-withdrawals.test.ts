import { describe, expect, it } from 'vitest'
import { createWorld } from './world.js'
import { createWithdrawals } from './world-withdrawals.js'

const NOW = Date.parse('2026-11-28T12:00:00Z')
const world = () =>
  createWorld({ seed: 3, now: NOW, users: 80, historyPosts: 600, demoConversations: 2 })

describe('the world’s withdrawals', () => {
  it('are the same for the same seed, and mix deletes, hides, reversals and user events', () => {
    const a = createWithdrawals(world(), 3)
    const b = createWithdrawals(world(), 3)
    const run = (w: typeof a) => Array.from({ length: 200 }, (_, i) => w.step(NOW + i * 1_000))
    const events = run(a)
    expect(run(b)).toEqual(events)
    const actions = new Set(events.map((e) => e?.action))
    for (const action of ['delete', 'user_protect', 'user_suspend', 'withheld', 'drop']) {
      expect(actions).toContain(action)
    }
    expect(events.filter((e) => e?.action === 'delete').length).toBeGreaterThan(80)
  })

  it('make a deleted Post and a protected author’s Posts withdrawn, and replay by time and kind', () => {
    const w = world()
    const withdrawals = createWithdrawals(w, 3)
    const [deleted, hidden] = [...w.newestFirst()].filter((p) => p.kind !== 'retweet')
    expect(withdrawals.postState(deleted!.id)).toBeUndefined()
    withdrawals.deletePost(deleted!.id, NOW)
    withdrawals.apply({
      kind: 'user',
      id: hidden!.authorId,
      action: 'user_protect',
      eventAt: new Date(NOW + 5).toISOString(),
    })
    expect(withdrawals.postState(deleted!.id)).toBe('deleted')
    if (hidden!.authorId !== deleted!.authorId)
      expect(withdrawals.postState(hidden!.id)).toBe('protected')
    expect(withdrawals.between('tweet', NOW).map((e) => e.id)).toEqual([deleted!.id])
    expect(withdrawals.between('user', NOW).map((e) => e.action)).toEqual(['user_protect'])
    expect(withdrawals.between('tweet', NOW + 1)).toEqual([])
    expect(withdrawals.jobResults('tweets', [deleted!.id, '1']).map((r) => r.reason)).toEqual([
      'deleted',
    ])

    withdrawals.apply({ kind: 'user', id: hidden!.authorId, action: 'user_unprotect' })
    if (hidden!.authorId !== deleted!.authorId)
      expect(withdrawals.postState(hidden!.id)).toBeUndefined()
  })
})
