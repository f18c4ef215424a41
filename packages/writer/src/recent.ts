import { INCLUDED_REFRESH_MS } from '@threadline/db'
import type { NormalizedBatch } from '@threadline/domain'

/** What a statement was sent, as `remember` reads it (a NormalizedBatch is one). */
export interface SentRows {
  posts: ReadonlyArray<{ id: string; observed_at: string }>
  users: ReadonlyArray<{ id: string; observed_at: string; name: string; username: string }>
}

/**
 * What this writer process stored lately, so that copies Postgres would skip anyway are not sent.
 *
 * Every line carries its users and the Posts it replies to or quotes: in a busy conversation the
 * same parent and the same authors arrive hundreds of times a minute. storeBatch refreshes a stored
 * Post from an included copy, and a user from any copy, at most once a minute unless a user's name
 * or username changed; the copies it skips would still cost their validation, tokenizing, JSON and
 * an index probe each. This drops exactly those, by the statement's own rule, from what this
 * process's committed statements were sent. Primary Posts always go through, and another writer's
 * commits are unknown here, so the statement's own checks stay and decide the rest.
 */
export class RecentlyStored {
  /** Post id → observed_at (ms) of the copy stored; Map order is insertion order, oldest first. */
  private readonly posts = new Map<string, number>()
  /** User id → the copy stored: when, and under which name and username. */
  private readonly users = new Map<string, { ms: number; name: string; username: string }>()
  /** Rows of a batch share one observed_at: parse it once, not per row. */
  private lastObserved = ''
  private lastMs = 0

  /** At most `capacity` Posts and `capacity` users are remembered. */
  constructor(private readonly capacity = 200_000) {}

  get size(): number {
    return this.posts.size + this.users.size
  }

  /**
   * Whether an included copy of Post `id` observed at `observedMs` would be skipped: for
   * normalizeLines' skipIncluded, so that such copies are not even validated and tokenized.
   */
  storedPost(id: string, observedMs: number): boolean {
    const stored = this.posts.get(id)
    return stored !== undefined && stored >= observedMs - INCLUDED_REFRESH_MS
  }

  /** The batch without the copies the statement would skip (rows are not copied). */
  skipKnown(batch: NormalizedBatch): NormalizedBatch {
    if (this.size === 0) return batch
    const posts = batch.posts.filter(
      (p) => !p.included || !this.storedPost(p.id, this.ms(p.observed_at)),
    )
    const users = batch.users.filter((u) => {
      const stored = this.users.get(u.id)
      return (
        stored === undefined ||
        stored.name !== u.name ||
        stored.username !== u.username ||
        stored.ms < this.ms(u.observed_at) - INCLUDED_REFRESH_MS
      )
    })
    if (posts.length === batch.posts.length && users.length === batch.users.length) return batch
    return { ...batch, posts, users }
  }

  /** Records the rows a committed statement was sent (what skipKnown returned). */
  remember(batch: SentRows): void {
    for (const p of batch.posts) {
      const ms = this.ms(p.observed_at)
      const prior = this.posts.get(p.id)
      if (prior !== undefined && prior >= ms) continue
      this.set(this.posts, p.id, ms)
    }
    for (const u of batch.users) {
      const ms = this.ms(u.observed_at)
      // The statement applies a copy only over an older one: an older copy under another name
      // left the stored row as it was, so it must not replace what is remembered.
      const prior = this.users.get(u.id)
      if (prior !== undefined && prior.ms >= ms) continue
      this.set(this.users, u.id, { ms, name: u.name, username: u.username })
    }
  }

  private ms(observedAt: string): number {
    if (observedAt !== this.lastObserved) {
      this.lastObserved = observedAt
      this.lastMs = Date.parse(observedAt)
    }
    return this.lastMs
  }

  private set<V>(map: Map<string, V>, key: string, value: V): void {
    map.delete(key) // re-inserted below: the newest go to the end
    map.set(key, value)
    if (map.size > this.capacity) {
      // Forget the oldest tenth at once (an eviction per insert would cost more than it saves).
      let drop = Math.ceil(this.capacity / 10)
      for (const k of map.keys()) {
        map.delete(k)
        if (--drop === 0) break
      }
    }
  }
}
