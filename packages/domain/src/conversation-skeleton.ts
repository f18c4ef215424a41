import { compareIds } from './ids.js'

/**
 * A conversation's skeleton (docs/api.md §5): its stored Posts column by column (element i of each
 * is Post i), all a tree is built from. A Post whose content is withdrawn is a row like any other:
 * its id, parent and time place it, and it has no author or likes.
 */
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
