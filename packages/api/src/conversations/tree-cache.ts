import { conversationVersion, readConversationSkeleton, type Db } from '@threadline/db'
import {
  buildConversationTree,
  type ConversationSort,
  type ConversationTree,
} from '@threadline/domain'

/**
 * Posts of held trees a process keeps, over all conversations: a skeleton and its trees cost a few
 * hundred bytes a Post, and the least recently read conversations go first.
 */
const MAX_HELD_POSTS = 400_000
/**
 * How long ago the store may last have been seen at a held tree's version for that tree to be
 * served while a newer one is read: a stored reply is on the pages within this, or within one read
 * and build when that takes longer (docs/api.md §5).
 */
const MAX_STALE_MS = 400
/**
 * A changed conversation's skeleton is read again at most this often: under a steady stream of
 * replies every read would otherwise start as the last ends, and the reads' CPU would delay every
 * answer. Targets (docs/api.md §5): the first page p99 ≤ 50 ms while 20 replies a second are
 * stored, a stored reply on the pages within 500 ms (p99).
 */
const MIN_READ_INTERVAL_MS = 200

/** One conversation's skeleton at one version, and its trees built so far (one per sort). */
export interface HeldTree {
  version: string
  reportedReplyCount: number | undefined
  /** Posts in the skeleton. */
  size: number
  tree(sort: ConversationSort): ConversationTree
}

interface Slot {
  held: HeldTree
  /** When the read of `held` started (ms, `now`). */
  readAt: number
  /** The sorts asked for: a newer skeleton builds them before it is served. */
  sorts: Set<ConversationSort>
  /** When the store was last known to be at `held.version` (ms, `now`). */
  freshAt: number
}

export interface TreeCacheOptions {
  maxPosts?: number
  maxStaleMs?: number
  minReadIntervalMs?: number
  /** The clock (ms); tests set it. */
  now?: () => number
}

const newer = (a: string, b: string) => BigInt(a) > BigInt(b)

/**
 * Conversation trees held per process by version (docs/api.md §5). The writer raises a
 * conversation's version in the transaction that changes it; each read compares it with the held
 * one (a primary-key read). When it moved, one read of the whole skeleton starts (one at a time per
 * conversation, at most one every `minReadIntervalMs`), and the held tree is served meanwhile
 * while it is at most `maxStaleMs` behind.
 */
export function createTreeCache(options: TreeCacheOptions = {}) {
  const maxPosts = options.maxPosts ?? MAX_HELD_POSTS
  const maxStaleMs = options.maxStaleMs ?? MAX_STALE_MS
  const minReadIntervalMs = Math.min(options.minReadIntervalMs ?? MIN_READ_INTERVAL_MS, maxStaleMs)
  const now = options.now ?? (() => performance.now())
  const slots = new Map<string, Slot>()
  const reading = new Map<string, Promise<HeldTree>>()
  let held = 0

  /** Holds `tree` unless a newer version is held; drops the least recently read past the bound. */
  const remember = (id: string, tree: HeldTree, readAt: number, sorts: Set<ConversationSort>) => {
    const old = slots.get(id)
    if (old && newer(old.held.version, tree.version)) return
    if (old) {
      held -= old.held.size
      slots.delete(id)
    }
    if (tree.size === 0) return
    slots.set(id, { held: tree, readAt, sorts, freshAt: readAt })
    held += tree.size
    for (const [key, slot] of slots) {
      if (held <= maxPosts) break
      if (key === id) continue
      slots.delete(key)
      held -= slot.held.size
    }
  }

  /** Reads the skeleton whole and holds it, one read at a time per conversation. */
  const read = (db: Db, id: string): Promise<HeldTree> => {
    let pending = reading.get(id)
    if (!pending) {
      const readAt = now()
      pending = readConversationSkeleton(db, id)
        .then((skeleton) => {
          const trees: Partial<Record<ConversationSort, ConversationTree>> = {}
          const tree: HeldTree = {
            version: skeleton.version,
            reportedReplyCount: skeleton.reportedReplyCount,
            size: skeleton.rows.ids.length,
            tree: (sort) => (trees[sort] ??= buildConversationTree(id, skeleton.rows, sort)),
          }
          const sorts = slots.get(id)?.sorts ?? new Set()
          // Built here rather than by the request that first needs them.
          for (const sort of sorts) tree.tree(sort)
          remember(id, tree, readAt, sorts)
          return tree
        })
        .finally(() => reading.delete(id))
      reading.set(id, pending)
    }
    return pending
  }

  /** Marks a conversation's held tree as the one read right now, and `sort` as asked for. */
  const touch = (id: string, slot: Slot, sort: ConversationSort) => {
    slots.delete(id)
    slots.set(id, slot)
    slot.sorts.add(sort)
  }

  return {
    /**
     * The conversation's tree at the store's version, or the one held while a newer one is read
     * and what it shows is at most `maxStaleMs` old.
     */
    async get(db: Db, id: string, sort: ConversationSort): Promise<HeldTree> {
      const checkedAt = now()
      const version = await conversationVersion(db, id)
      const slot = slots.get(id)
      let tree: HeldTree
      if (slot && !newer(version, slot.held.version)) {
        slot.freshAt = Math.max(slot.freshAt, checkedAt)
        tree = slot.held
      } else if (slot && checkedAt - slot.readAt < minReadIntervalMs) {
        // Read a moment ago: the next read starts once the interval is over.
        tree = slot.held
      } else {
        const pending = read(db, id)
        if (slot && now() - slot.freshAt <= maxStaleMs) {
          // Its failure is seen by the next read that waits for one.
          pending.catch(() => undefined)
          tree = slot.held
        } else tree = await pending
      }
      const current = slots.get(id)
      if (current) touch(id, current, sort)
      return tree
    },
    /** The conversation's tree read now, whatever is held. */
    read,
    /** Posts held, for tests and metrics. */
    held: () => held,
  }
}

export type TreeCache = ReturnType<typeof createTreeCache>
