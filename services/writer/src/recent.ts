import type { NormalizedBatch } from '@threadline/domain'

/** How long a stored copy satisfies an included one: store-batch.ts's INCLUDED_REFRESH. */
export const INCLUDED_REFRESH_MS = 60_000

/**
 * What this writer process stored lately, so that copies Postgres would skip anyway are not sent.
 *
 * Every line carries its users and the Posts it replies to or quotes: in a busy conversation the
 * same parent and the same authors arrive hundreds of times a minute. store-batch's statement
 * refreshes a stored Post from an included copy, and a user from any copy, at most once per
 * INCLUDED_REFRESH unless a user's name or username changed; the copies it skips still cost their
 * JSON, their trip to Postgres, their parsing there and an index probe each. This drops exactly
 * those copies before the statement, by the statement's own rule, from what this process sent
 * in statements that committed (`remember` the batch skipKnown returned, after commit). Primary
 * Posts always go through, as do users whose name or username differs from what was remembered.
 * Another writer's commits are unknown here, so the statement's own checks stay and decide the
 * rest; a copy sent and then skipped by the statement (another writer stored one within the
 * minute) is remembered as stored, so with several writers a refresh may come up to twice
 * INCLUDED_REFRESH apart instead of once.
 */
export class RecentlyStored {
  /** Key → observed_at (ms) of the copy stored; Map order is insertion order, oldest first. */
  private readonly seen = new Map<string, number>()

  constructor(private readonly capacity = 200_000) {}

  get size(): number {
    return this.seen.size
  }

  /**
   * Whether an included copy of Post `id` observed at `observedMs` would be skipped: for
   * normalizeLines' skipIncluded, so that such copies are not even validated and tokenized.
   */
  storedPost(id: string, observedMs: number): boolean {
    return this.fresh(`p${id}`, observedMs)
  }

  /** The batch without the copies the statement would skip (rows are not copied). */
  skipKnown(batch: NormalizedBatch): NormalizedBatch {
    if (this.seen.size === 0) return batch
    const posts = batch.posts.filter(
      (p) => !p.included || !this.fresh(`p${p.id}`, Date.parse(p.observed_at)),
    )
    const users = batch.users.filter((u) => !this.fresh(userKey(u), Date.parse(u.observed_at)))
    if (posts.length === batch.posts.length && users.length === batch.users.length) return batch
    return { ...batch, posts, users }
  }

  /** Records the rows a committed statement was sent (what skipKnown returned). */
  remember(batch: NormalizedBatch): void {
    for (const p of batch.posts) this.set(`p${p.id}`, p.observed_at)
    for (const u of batch.users) this.set(userKey(u), u.observed_at)
  }

  private fresh(key: string, observedMs: number): boolean {
    const stored = this.seen.get(key)
    return stored !== undefined && stored >= observedMs - INCLUDED_REFRESH_MS
  }

  private set(key: string, observedAt: string): void {
    const ms = Date.parse(observedAt)
    const prior = this.seen.get(key)
    if (prior !== undefined) {
      if (prior >= ms) return
      this.seen.delete(key) // re-inserted below: the newest go to the end
    }
    this.seen.set(key, ms)
    if (this.seen.size > this.capacity) {
      // Forget the oldest tenth at once (an eviction per insert would cost more than it saves).
      let drop = Math.ceil(this.capacity / 10)
      for (const k of this.seen.keys()) {
        this.seen.delete(k)
        if (--drop === 0) break
      }
    }
  }
}

/** A user is known by id, name and username together: a new name must reach the statement. */
function userKey(u: { id: string; name: string; username: string }): string {
  return `u${u.id}\u0000${u.name}\u0000${u.username}`
}
