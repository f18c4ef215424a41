import { compareOldest, type SkeletonRows } from './conversation-skeleton.js'

/**
 * A conversation as a tree (docs/api.md §5): its stored Posts in depth-first pre-order from the
 * root, replies to one Post in the order of a sort, orphans (replies whose parent is not stored)
 * hung under the root with their subtrees. Pure: the caller reads the skeleton rows (see
 * readConversationSkeleton in @threadline/db) and pages through the result.
 */

export const CONVERSATION_SORTS = ['oldest', 'newest', 'top'] as const
export type ConversationSort = (typeof CONVERSATION_SORTS)[number]

/** The `thread` member of a Post on a tree page. */
export interface ThreadMember {
  depth: number
  parent_id?: string
  reply_count: number
  descendant_count: number
  missing_parent?: true
}

export interface ConversationTreeMeta {
  post_count: number
  reply_count: number
  missing_count: number
  max_depth: number
  participant_count: number
  first_created_at?: string
  last_created_at?: string
}

export interface ConversationTree {
  conversationId: string
  sort: ConversationSort
  /** Posts stored; the length of the pre-order. */
  size: number
  rootStored: boolean
  meta: ConversationTreeMeta
  /** The id of the Post at a pre-order position (0 ≤ position < size). */
  idAt(position: number): string
  /** The `thread` member of the Post at a pre-order position. */
  threadAt(position: number): ThreadMember
  /** The parent not stored of the Post at a position, when it is an orphan with a known parent. */
  missingParentAt(position: number): string | undefined
  /** The pre-order position of a stored Post, or undefined. */
  positionOf(id: string): number | undefined
}

/** Every Post of a tree with its `thread` member, in pre-order. */
export function* walkConversationTree(
  tree: ConversationTree,
  from = 0,
): Generator<{ id: string; thread: ThreadMember }> {
  for (let p = from; p < tree.size; p++) yield { id: tree.idAt(p), thread: tree.threadAt(p) }
}

/** Siblings' order for a sort, over row indexes. */
function siblingOrder(
  rows: SkeletonRows,
  sort: ConversationSort,
): (a: number, b: number) => number {
  const { likes } = rows
  const oldest = (a: number, b: number) => compareOldest(rows, a, b)
  switch (sort) {
    case 'oldest':
      return oldest
    case 'newest':
      return (a, b) => oldest(b, a)
    case 'top':
      return (a, b) => likes[b]! - likes[a]! || oldest(a, b)
  }
}

/** Rows below this many can be ranked by one packed number (row index in the low 21 bits). */
const PACKED_ROWS = 1 << 21
const MAX_PACKED_LIKES = 2 ** 31 - 1

/**
 * Row indexes in sort order. Rows usually come in id order, and ids follow time, so for `oldest`
 * and `newest` one pass that confirms it replaces the sort; `top` then sorts packed numbers
 * (fewer likes high, the oldest rank low) natively, without a comparator.
 */
function sortedRows(rows: SkeletonRows, sort: ConversationSort, n: number): Int32Array {
  const sorted = new Int32Array(n)
  const oldest = siblingOrder(rows, 'oldest')
  let inOrder = true
  for (let r = 1; r < n && inOrder; r++) inOrder = oldest(r - 1, r) < 0
  if (inOrder && sort === 'oldest') {
    for (let r = 0; r < n; r++) sorted[r] = r
  } else if (inOrder && sort === 'newest') {
    for (let r = 0; r < n; r++) sorted[r] = n - 1 - r
  } else if (inOrder && sort === 'top' && n < PACKED_ROWS) {
    const keys = new Float64Array(n)
    for (let r = 0; r < n; r++) {
      const likes = Math.min(Math.max(rows.likes[r]!, 0), MAX_PACKED_LIKES)
      keys[r] = (MAX_PACKED_LIKES - likes) * PACKED_ROWS + r
    }
    keys.sort()
    for (let i = 0; i < n; i++) sorted[i] = keys[i]! % PACKED_ROWS
  } else {
    for (let r = 0; r < n; r++) sorted[r] = r
    sorted.sort(siblingOrder(rows, sort))
  }
  return sorted
}

/** A built tree's arrays: per pre-order position (order, depthAt) or per row (the rest). */
interface Layout {
  conversationId: string
  sort: ConversationSort
  rows: SkeletonRows
  n: number
  rowOf: ReadonlyMap<string, number>
  root: number
  /** The parent's row, -1 when the referenced parent is not stored, -2 without a reference. */
  parentRow: Int32Array
  order: Int32Array
  depthAt: Int32Array
  replies: Int32Array
  descendants: Int32Array
  positionOfRow: Int32Array
  /** Parents referenced but not stored. */
  missing: ReadonlySet<string>
  meta: ConversationTreeMeta
}

class BuiltTree implements ConversationTree {
  constructor(readonly layout: Layout) {}
  get conversationId() {
    return this.layout.conversationId
  }
  get sort() {
    return this.layout.sort
  }
  get size() {
    return this.layout.n
  }
  get rootStored() {
    return this.layout.root >= 0
  }
  get meta() {
    return this.layout.meta
  }
  idAt(position: number): string {
    return this.layout.rows.ids[this.layout.order[position]!]!
  }
  threadAt(position: number): ThreadMember {
    const { order, depthAt, replies, descendants, root, rows, parentRow } = this.layout
    const r = order[position]!
    const thread: ThreadMember = {
      depth: depthAt[position]!,
      reply_count: replies[r]!,
      descendant_count: descendants[r]!,
    }
    const parent = r === root ? null : rows.parents[r]
    if (parent != null) thread.parent_id = parent
    if (r !== root && parentRow[r]! < 0) thread.missing_parent = true
    return thread
  }
  missingParentAt(position: number): string | undefined {
    const r = this.layout.order[position]!
    return this.layout.parentRow[r] === -1 ? this.layout.rows.parents[r]! : undefined
  }
  positionOf(id: string): number | undefined {
    const r = this.layout.rowOf.get(id)
    return r === undefined ? undefined : this.layout.positionOfRow[r]
  }
}

function metaOf(
  rows: SkeletonRows,
  n: number,
  replyCount: number,
  missing: ReadonlySet<string>,
  maxDepth: number,
  participants: number,
  first: number,
  last: number,
): ConversationTreeMeta {
  return {
    post_count: n,
    reply_count: replyCount,
    missing_count: missing.size,
    max_depth: maxDepth,
    participant_count: participants,
    ...(n > 0
      ? {
          first_created_at: new Date(first).toISOString(),
          last_created_at: new Date(last).toISOString(),
        }
      : {}),
  }
}

/** Each row's replies (CSR: `children[childStart[r]..childStart[r+1]]`), in sort order. */
function childLists(
  parentRow: Int32Array,
  sorted: Int32Array,
  n: number,
): { childStart: Int32Array; children: Int32Array } {
  const childStart = new Int32Array(n + 1)
  for (let r = 0; r < n; r++) {
    const p = parentRow[r]!
    if (p >= 0 && p !== r) childStart[p + 1]!++
  }
  for (let r = 0; r < n; r++) childStart[r + 1]! += childStart[r]!
  const fill = childStart.slice(0, n)
  const children = new Int32Array(childStart[n]!)
  // Filled from `sorted`, so each list is in sort order.
  for (const r of sorted) {
    const p = parentRow[r]!
    if (p >= 0 && p !== r) children[fill[p]!++] = r
  }
  return { childStart, children }
}

/** The missing parents and the tree's meta, from the rows and the walk's depths. */
function summarize(
  rows: SkeletonRows,
  n: number,
  root: number,
  parentRow: Int32Array,
  depthAt: Int32Array,
): { missing: Set<string>; meta: ReturnType<typeof metaOf> } {
  const { parents } = rows
  let replyCount = 0
  let maxDepth = 0
  let first = Infinity
  let last = -Infinity
  const missing = new Set<string>()
  const authors = new Set<string>()
  for (let r = 0; r < n; r++) {
    if (r !== root && parents[r] != null) replyCount++
    if (parentRow[r] === -1) missing.add(parents[r]!)
    const a = rows.authors[r]
    if (a != null) authors.add(a)
    const ms = rows.createdMs[r]!
    if (ms < first) first = ms
    if (ms > last) last = ms
  }
  for (let p = 0; p < n; p++) if (depthAt[p]! > maxDepth) maxDepth = depthAt[p]!
  return {
    missing,
    meta: metaOf(rows, n, replyCount, missing, maxDepth, authors.size, first, last),
  }
}

/**
 * Builds the tree of one conversation in a few linear passes and one sort: replies are grouped
 * under their parents in sort order (a counting sort over the sorted rows), then walked
 * depth-first with an explicit stack, so depth is never limited by the call stack. Every row
 * appears exactly once: a reply whose parent is stored but that the root never reaches (a cycle in
 * bad data) is hung under the root like an orphan, without `missing_parent`.
 */
export function buildConversationTree(
  conversationId: string,
  rows: SkeletonRows,
  sort: ConversationSort = 'oldest',
): ConversationTree {
  const { ids, parents } = rows
  const n = ids.length
  const rowOf = new Map<string, number>()
  for (let r = 0; r < n; r++) rowOf.set(ids[r]!, r)
  const rowIn = (id: string) => rowOf.get(id) ?? -1
  const root = rowIn(conversationId)

  const parentRow = new Int32Array(n)
  for (let r = 0; r < n; r++) {
    const p = parents[r]
    parentRow[r] = r === root || p === null || p === undefined ? -2 : rowIn(p)
  }

  const sorted = sortedRows(rows, sort, n)

  const { childStart, children } = childLists(parentRow, sorted, n)

  const order = new Int32Array(n)
  const depthAt = new Int32Array(n)
  const walkParent = new Int32Array(n).fill(-1)
  const visited = new Uint8Array(n)
  const stackRow = new Int32Array(n)
  const stackDepth = new Int32Array(n)
  let pos = 0
  const walk = (top: number, topDepth: number) => {
    let sp = 0
    stackRow[sp] = top
    stackDepth[sp++] = topDepth
    while (sp > 0) {
      const r = stackRow[--sp]!
      const d = stackDepth[sp]!
      if (visited[r]) continue
      visited[r] = 1
      order[pos] = r
      depthAt[pos++] = d
      // Pushed last first, so that the first child is walked next.
      for (let c = childStart[r + 1]! - 1; c >= childStart[r]!; c--) {
        const child = children[c]!
        if (visited[child]) continue
        walkParent[child] = r
        stackRow[sp] = child
        stackDepth[sp++] = d + 1
      }
    }
  }
  if (root >= 0) walk(root, 0)
  for (const r of sorted) if (r !== root && parentRow[r]! < 0) walk(r, 1)
  // What is left sits on a cycle of replies, or below one: walk from the cycle, reached by
  // following parents up from the first such Post in sort order.
  const chase = new Int32Array(n).fill(-1)
  for (const r of sorted) {
    if (visited[r]) continue
    let top = r
    for (;;) {
      chase[top] = r
      const p = parentRow[top]!
      if (p < 0 || visited[p]) break
      // Back at a Post of this chase: the cycle, entered where this chase first met it.
      if (chase[p] === r) {
        top = p
        break
      }
      top = p
    }
    walk(top, 1)
  }

  // Counts from the walk itself, children before parents (reverse pre-order).
  const replies = new Int32Array(n)
  const descendants = new Int32Array(n)
  for (let p = n - 1; p >= 0; p--) {
    const r = order[p]!
    const wp = walkParent[r]!
    if (wp < 0) continue
    replies[wp]!++
    descendants[wp]! += descendants[r]! + 1
  }
  const positionOfRow = new Int32Array(n)
  for (let p = 0; p < n; p++) positionOfRow[order[p]!] = p

  const { missing, meta } = summarize(rows, n, root, parentRow, depthAt)

  return new BuiltTree({
    conversationId,
    sort,
    rows,
    n,
    rowOf,
    root,
    parentRow,
    order,
    depthAt,
    replies,
    descendants,
    positionOfRow,
    missing,
    meta,
  })
}
