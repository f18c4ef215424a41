import { compareIds } from './ids.js'

/** The stored Posts of one conversation, column by column (element i of each is Post i). */
export interface SkeletonRows {
  ids: readonly string[]
  /** The Post each one replies to (its `replied_to` reference), or null. */
  parents: ReadonlyArray<string | null>
  authors: ReadonlyArray<string | null>
  /** created_at in epoch milliseconds. */
  createdMs: ArrayLike<number>
  /** like_count (0 when unknown). */
  likes: ArrayLike<number>
}

/** (created, id) order, the order of `oldest`: a negative number when row a comes first. */
export function compareOldest(rows: SkeletonRows, a: number, b: number): number {
  return rows.createdMs[a]! - rows.createdMs[b]! || compareIds(rows.ids[a]!, rows.ids[b]!)
}

/** What applying a delta did to a held skeleton (see HeldSkeleton.apply). */
export interface SkeletonChange {
  /** The skeleton to use from now on; the one applied to is not used again. */
  skeleton: HeldSkeleton
  /**
   * When the delta only added Posts newer than every Post held (and maybe changed likes), the row
   * they start at: a tree in `oldest` or `newest` order can be extended by them (see
   * extendConversationTree). Undefined when trees must be built again.
   */
  appendedFrom: number | undefined
}

/**
 * A conversation's skeleton kept between versions (docs/api.md §5): a tree read once is brought
 * to a newer version by the rows that changed since, not by reading it whole again. Posts are only
 * ever stored or replaced, never deleted, so the rows that changed say everything that did.
 *
 * Rows only grow at the end while the skeleton is held: trees built from it keep the row count
 * they were built with, so rows appended later are invisible to them and they stay valid for the
 * version they were built at. A change to a row already held makes a new skeleton instead: new
 * likes copy that one column, anything that moves a Post (a parent, a time) rebuilds it whole.
 */
export class HeldSkeleton implements SkeletonRows {
  /** Row of each id. */
  readonly rowOf: Map<string, number>
  /** Every author of the rows held. */
  readonly authorSet: Set<string>
  /** The row last in `oldest` order. */
  private newest = -1
  private superseded = false

  private constructor(
    readonly ids: string[],
    readonly parents: Array<string | null>,
    readonly authors: Array<string | null>,
    readonly createdMs: number[],
    readonly likes: number[],
    rowOf?: Map<string, number>,
    authorSet?: Set<string>,
  ) {
    this.rowOf = rowOf ?? new Map()
    this.authorSet = authorSet ?? new Set()
    if (!rowOf) for (let r = 0; r < ids.length; r++) this.rowOf.set(ids[r]!, r)
    if (!authorSet) for (const a of authors) if (a != null) this.authorSet.add(a)
    for (let r = 0; r < ids.length; r++) {
      if (this.newest < 0 || compareOldest(this, this.newest, r) < 0) this.newest = r
    }
  }

  static of(rows: SkeletonRows): HeldSkeleton {
    return new HeldSkeleton(
      [...rows.ids],
      [...rows.parents],
      [...rows.authors],
      Array.from(rows.createdMs),
      Array.from(rows.likes),
    )
  }

  /** Rows held. */
  get size(): number {
    return this.ids.length
  }

  /**
   * Applies the rows stored or replaced since this skeleton was read (each row's latest copy).
   * New Posts newer than every held one are appended; anything that moves a held Post (a new
   * parent, another time) or a new Post older than the newest held one gives a skeleton rebuilt in
   * `oldest` order.
   */
  apply(delta: SkeletonRows): SkeletonChange {
    if (this.superseded) throw new Error('this skeleton was superseded by an applied delta')
    this.superseded = true
    const added: number[] = []
    let likes = this.likes
    let reshaped = false
    for (let d = 0; d < delta.ids.length; d++) {
      const r = this.rowOf.get(delta.ids[d]!)
      if (r === undefined) {
        added.push(d)
        continue
      }
      if (
        this.parents[r] !== delta.parents[d] ||
        this.createdMs[r] !== delta.createdMs[d] ||
        this.authors[r] !== delta.authors[d]
      ) {
        reshaped = true
      } else if (likes[r] !== delta.likes[d]) {
        if (likes === this.likes) likes = [...likes]
        likes[r] = delta.likes[d]!
      }
    }
    added.sort((a, b) => compareOldest(delta, a, b))
    const appendable =
      !reshaped &&
      (added.length === 0 ||
        this.newest < 0 ||
        compareOldestAcross(this, this.newest, delta, added[0]!) < 0)
    if (!appendable) return { skeleton: this.rebuiltWith(delta), appendedFrom: undefined }

    const next =
      likes === this.likes
        ? this
        : new HeldSkeleton(
            this.ids,
            this.parents,
            this.authors,
            this.createdMs,
            likes,
            this.rowOf,
            this.authorSet,
          )
    next.superseded = false
    const from = next.size
    for (const d of added) {
      const r = next.ids.length
      next.ids.push(delta.ids[d]!)
      next.parents.push(delta.parents[d]!)
      next.authors.push(delta.authors[d]!)
      next.createdMs.push(delta.createdMs[d]!)
      next.likes.push(delta.likes[d]!)
      next.rowOf.set(delta.ids[d]!, r)
      const author = delta.authors[d]
      if (author != null) next.authorSet.add(author)
      next.newest = r
    }
    return { skeleton: next, appendedFrom: from }
  }

  /** A new skeleton of every row, the delta's copy of a row winning, in `oldest` order. */
  private rebuiltWith(delta: SkeletonRows): HeldSkeleton {
    const latest = new Map<string, [string | null, string | null, number, number]>()
    for (let r = 0; r < this.size; r++) {
      latest.set(this.ids[r]!, [
        this.parents[r]!,
        this.authors[r]!,
        this.createdMs[r]!,
        this.likes[r]!,
      ])
    }
    for (let d = 0; d < delta.ids.length; d++) {
      latest.set(delta.ids[d]!, [
        delta.parents[d]!,
        delta.authors[d]!,
        delta.createdMs[d]!,
        delta.likes[d]!,
      ])
    }
    const entries = [...latest].sort(([a, x], [b, y]) => x[2] - y[2] || compareIds(a, b))
    return new HeldSkeleton(
      entries.map(([id]) => id),
      entries.map(([, x]) => x[0]),
      entries.map(([, x]) => x[1]),
      entries.map(([, x]) => x[2]),
      entries.map(([, x]) => x[3]),
    )
  }
}

function compareOldestAcross(a: SkeletonRows, i: number, b: SkeletonRows, j: number): number {
  return a.createdMs[i]! - b.createdMs[j]! || compareIds(a.ids[i]!, b.ids[j]!)
}
