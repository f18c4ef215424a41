import { describe, expect, it } from 'vitest'
import type { NormalizedBatch, PostRow, UserRow } from '@threadline/domain'
import { INCLUDED_REFRESH_MS } from '@threadline/db'
import { RecentlyStored } from './recent.js'

const at = (s: number) => new Date(Date.UTC(2026, 10, 1) + s * 1000).toISOString()

const post = (id: string, observed: number, included: boolean) =>
  ({ id, observed_at: at(observed), included }) as PostRow
const user = (id: string, observed: number, name = `n${id}`) =>
  ({ id, name, username: `u${id}`, observed_at: at(observed) }) as UserRow
const batch = (posts: PostRow[], users: UserRow[] = []): NormalizedBatch => ({
  posts,
  users,
  rejects: [],
  empty: 0,
})
const ids = (b: NormalizedBatch) => [...b.posts.map((p) => p.id), ...b.users.map((u) => u.id)]

describe('RecentlyStored', () => {
  it('passes everything through while it knows nothing', () => {
    const b = batch([post('1', 0, true)], [user('9', 0)])
    expect(new RecentlyStored().skipKnown(b)).toBe(b)
  })

  it('drops included copies and users stored within the refresh period, never primary Posts', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([post('1', 0, false), post('2', 0, true)], [user('9', 0)]))
    const next = recent.skipKnown(
      batch(
        [post('1', 30, true), post('2', 30, true), post('1', 30, false), post('3', 30, true)],
        [user('9', 30)],
      ),
    )
    // 1 included: dropped; 2 included: dropped; 1 primary: kept; 3 unknown: kept; user 9: dropped.
    expect(ids(next)).toEqual(['1', '3'])
    expect(next.posts[0]!.included).toBe(false)
  })

  it('lets a copy through once the stored one is older than the refresh period', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([post('2', 0, true)], [user('9', 0)]))
    const edge = INCLUDED_REFRESH_MS / 1000
    expect(ids(recent.skipKnown(batch([post('2', edge, true)], [user('9', edge)])))).toEqual([])
    expect(
      ids(recent.skipKnown(batch([post('2', edge + 1, true)], [user('9', edge + 1)]))),
    ).toEqual(['2', '9'])
  })

  it('lets a user with a new name or username through at once', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([], [user('9', 0, 'Old name')]))
    expect(ids(recent.skipKnown(batch([], [user('9', 1, 'New name')])))).toEqual(['9'])
  })

  it('knows a user by its latest stored copy: a rename back is not skipped, an older copy changes nothing', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([], [user('9', 0, 'A')]))
    recent.remember(batch([], [user('9', 10, 'B')]))
    // Renamed back to A within the minute: the stored row says B, so the copy must go through.
    expect(ids(recent.skipKnown(batch([], [user('9', 20, 'A')])))).toEqual(['9'])
    // An older copy under another name did not change the stored row (B at 10 s).
    recent.remember(batch([], [user('9', 5, 'C')]))
    expect(ids(recent.skipKnown(batch([], [user('9', 30, 'B')])))).toEqual([])
    expect(ids(recent.skipKnown(batch([], [user('9', 30, 'C')])))).toEqual(['9'])
  })

  it('remembers only what it is told was sent, so skipped copies do not postpone a refresh', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([post('2', 0, true)]))
    // Copies at 30 s and 50 s are skipped (not remembered); one at 61 s goes through.
    for (const s of [30, 50]) recent.remember(recent.skipKnown(batch([post('2', s, true)])))
    expect(ids(recent.skipKnown(batch([post('2', 61, true)])))).toEqual(['2'])
  })

  it('stays within its capacity, forgetting the oldest first', () => {
    const recent = new RecentlyStored(100)
    for (let i = 0; i < 1_000; i++) recent.remember(batch([post(String(i), 0, true)]))
    expect(recent.size).toBeLessThanOrEqual(100)
    expect(ids(recent.skipKnown(batch([post('999', 1, true), post('0', 1, true)])))).toEqual(['0'])
  })
})

describe('RecentlyStored.storedPost (normalizeLines skipIncluded)', () => {
  it('answers by the same rule as skipKnown', () => {
    const recent = new RecentlyStored()
    recent.remember(batch([post('1', 0, false)]))
    expect(recent.storedPost('1', Date.parse(at(30)))).toBe(true)
    expect(recent.storedPost('1', Date.parse(at(0)) + INCLUDED_REFRESH_MS + 1)).toBe(false)
    expect(recent.storedPost('2', Date.parse(at(30)))).toBe(false)
  })
})
