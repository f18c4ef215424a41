import type { NormalizedBatch, PostRow } from '@threadline/domain'

/** What a statement was sent, as `remember` reads it (a NormalizedBatch is one). */
export interface SentRows {
  posts: ReadonlyArray<{ id: string; observed_at: string }>
  users: ReadonlyArray<{ id: string; observed_at: string; name: string; username: string }>
}

/** An included copy left out of a batch for a statement of this process storing the same Post. */
export interface Deferred {
  row: PostRow
  /** Whether that statement committed; when it did not, the copy is stored after all. */
  committed: Promise<boolean>
}

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
  /** Post id → observed_at (ms) of the copy stored; Map order is insertion order, oldest first. */
  private readonly posts = new Map<string, number>()
  /** User id → the copy stored: when, and under which name and username. */
  private readonly users = new Map<string, { ms: number; name: string; username: string }>()
  /** Post id → the copy an unsettled statement of this process sends: when, and its outcome. */
  private readonly inFlight = new Map<string, { ms: number; committed: Promise<boolean> }>()
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

  /**
   * Registers the Posts a statement is about to send. Returns what to call once it has committed
   * (true) or failed (false).
   */
  sending(posts: SentRows['posts']): (committed: boolean) => void {
    let settle!: (committed: boolean) => void
    const committed = new Promise<boolean>((resolve) => (settle = resolve))
    const entries = posts.map((p) => [p.id, { ms: this.ms(p.observed_at), committed }] as const)
    for (const [id, entry] of entries) this.inFlight.set(id, entry)
    return (ok) => {
      for (const [id, entry] of entries) {
        if (this.inFlight.get(id) === entry) this.inFlight.delete(id)
      }
      settle(ok)
    }
  }

  /**
   * The batch without the included copies of Posts that an unsettled statement of this process
   * sends, and those copies with that statement's outcome (see storeLines).
   *
   * Concurrent batches of a busy conversation carry the same parent. Each copy sent while the first
   * was uncommitted waited on its insert's lock, then rewrote the row (its copy was newer): the
   * batches were serialised on the thread's hot rows and Postgres wrote each of them again. Left
   * out, the copy is what skipKnown would have dropped a moment later, once the first committed
   * (by the same rule: within INCLUDED_REFRESH of the copy being sent).
   */
  deferInFlight(batch: NormalizedBatch): { batch: NormalizedBatch; deferred: Deferred[] } {
    if (this.inFlight.size === 0) return { batch, deferred: [] }
    const deferred: Deferred[] = []
    const posts = batch.posts.filter((row) => {
      const sending = row.included ? this.inFlight.get(row.id) : undefined
      if (sending === undefined || sending.ms < this.ms(row.observed_at) - INCLUDED_REFRESH_MS) {
        return true
      }
      deferred.push({ row, committed: sending.committed })
      return false
    })
    return deferred.length === 0 ? { batch, deferred } : { batch: { ...batch, posts }, deferred }
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
