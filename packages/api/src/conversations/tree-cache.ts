import {
  conversationVersion,
  readConversationSkeleton,
  readSkeletonChanges,
  type ConversationSkeleton,
  type Db,
} from '@threadline/db'
import {
  buildConversationTree,
  extendConversationTree,
  HeldSkeleton,
  type ConversationSort,
  type ConversationTree,
} from '@threadline/domain'
import { WirePosts } from './wire-posts.js'

/**
 * Posts of built trees a process keeps, over all conversations: a tree costs a few hundred bytes
 * a Post, and the least recently read conversations go first.
 */
const MAX_CACHED_POSTS = 400_000
/** A Post kept in wire form (≈ 1 KB) counts as this many Posts of a tree. */
const WIRE_WEIGHT = 4

/** One conversation's skeleton at one version, and its trees built so far (one per sort). */
export interface TreeEntry {
  version: string
  reportedReplyCount: number | undefined
  tree(sort: ConversationSort): ConversationTree
  /**
   * Its Posts in wire form with the fields `fields` (JSON text by id), as read at this version:
   * what a page finds here it need not read again while the version stands. Fill with `keep`.
   */
  wirePosts(fields: string): ReadonlyMap<string, string>
  keep(fields: string, posts: ReadonlyMap<string, string>): void
}

interface HeldEntry extends TreeEntry {
  /** The snapshot the skeleton is up to date with. */
  snapshot: string
  skeleton: HeldSkeleton
  /** Rows of the skeleton at this version (it may have grown since, for a later version). */
  size: number
  trees: Partial<Record<ConversationSort, ConversationTree>>
  wire: WirePosts
}

function entryOf(
  id: string,
  read: ConversationSkeleton,
  skeleton: HeldSkeleton,
  trees: HeldEntry['trees'] = {},
  wire = new WirePosts(),
): HeldEntry {
  const size = skeleton.size
  return {
    version: read.version,
    snapshot: read.snapshot,
    reportedReplyCount: read.reportedReplyCount,
    skeleton,
    size,
    trees,
    wire,
    tree(sort) {
      return (trees[sort] ??= buildConversationTree(id, skeleton, sort, size))
    },
    wirePosts: (fields) => wire.get(fields) ?? new Map(),
    // Replaced by the cache for the entries it remembers, which count what they keep.
    keep: () => {},
  }
}

/** The entry after the Posts changed since `held` was read: its trees extended where they can be. */
function advanced(id: string, held: HeldEntry, changes: ConversationSkeleton): HeldEntry {
  if (changes.rows.ids.length === 0) {
    return entryOf(id, changes, held.skeleton, held.trees, held.wire.without(new Set()))
  }
  const { skeleton, appendedFrom } = held.skeleton.apply(changes.rows)
  const trees: HeldEntry['trees'] = {}
  if (appendedFrom !== undefined) {
    for (const sort of ['oldest', 'newest'] as const) {
      const tree = held.trees[sort]
      const extended = tree && extendConversationTree(tree, skeleton, appendedFrom)
      if (extended) trees[sort] = extended
    }
  }
  return entryOf(id, changes, skeleton, trees, held.wire.without(new Set(changes.rows.ids)))
}

const newer = (a: string, b: string) => BigInt(a) > BigInt(b)

/**
 * Built conversation trees, kept per process by (conversation, version, sort) (docs/api.md §5).
 * The writer bumps a conversation's version in the transaction that changes it, so the pages of
 * a tree are cut from one build while nothing changes; a caller checks the version it holds
 * against the store's in the statement that reads the page (wirePostsAtVersion), or with `get`.
 * A tree held at an older version is brought forward by the Posts changed since (its delta), not
 * read again whole.
 */
export function createTreeCache(maxPosts = MAX_CACHED_POSTS) {
  const entries = new Map<string, { entry: HeldEntry; size: number }>()
  const reading = new Map<string, Promise<{ entry: TreeEntry; posts?: Map<string, string> }>>()
  let held = 0

  const weigh = (entry: HeldEntry) => entry.size + WIRE_WEIGHT * entry.wire.count

  /** Drops the least recently read entries other than `id` while over the bound. */
  const trim = (id: string) => {
    for (const [key, e] of entries) {
      if (held <= maxPosts) break
      if (key === id) continue
      entries.delete(key)
      held -= e.size
    }
  }

  const remember = (id: string, entry: HeldEntry) => {
    const old = entries.get(id)
    if (old && newer(old.entry.version, entry.version)) return
    if (old) {
      held -= old.size
      entries.delete(id)
    }
    const slot = { entry, size: weigh(entry) }
    entries.set(id, slot)
    held += slot.size
    entry.keep = (fields, posts) => {
      entry.wire.keep(fields, posts)
      if (entries.get(id) !== slot) return
      held -= slot.size
      slot.size = weigh(entry)
      held += slot.size
      trim(id)
    }
    trim(id)
  }

  /** Concurrent reads of the same kind share one statement. */
  const shared = (
    key: string,
    read: () => Promise<{ entry: TreeEntry; posts?: Map<string, string> }>,
  ) => {
    let pending = reading.get(key)
    if (!pending) {
      pending = read().finally(() => reading.delete(key))
      reading.set(key, pending)
    }
    return pending
  }

  /**
   * Reads and remembers a conversation's skeleton whole; with `posts`, also its Posts in wire
   * form when it holds at most `upTo` (see readConversationSkeleton).
   */
  const load = (db: Db, id: string, posts?: { fields: readonly string[]; upTo: number }) =>
    shared(posts ? `${id}:${posts.upTo}:${posts.fields.join(',')}` : id, () =>
      readWhole(db, id, posts),
    )

  const readWhole = async (
    db: Db,
    id: string,
    posts?: { fields: readonly string[]; upTo: number },
  ) => {
    const read = await readConversationSkeleton(db, id, posts)
    const entry = entryOf(id, read, HeldSkeleton.of(read.rows))
    // A tree that came whole with its Posts is read as cheaply again as it would be from
    // here (one statement either way): only larger ones are kept.
    if (!read.posts && read.rows.ids.length > 0) remember(id, entry)
    return { entry, ...(read.posts ? { posts: read.posts } : {}) }
  }

  /**
   * The entry at the store's version now: the held one brought forward by its delta, or, with
   * none held, a whole read (as `load`). A caller that has seen the store at `seen` gets the held
   * entry without a read when another caller brought it there meanwhile.
   */
  const refresh = (
    db: Db,
    id: string,
    posts?: { fields: readonly string[]; upTo: number },
    seen?: string,
  ): Promise<{ entry: TreeEntry; posts?: Map<string, string> }> => {
    const start = entries.get(id)?.entry
    if (!start) return load(db, id, posts)
    if (seen !== undefined && !newer(seen, start.version)) return Promise.resolve({ entry: start })
    return shared(id, async () => {
      const changes = await readSkeletonChanges(db, id, start.snapshot)
      const current = entries.get(id)?.entry
      // Another read moved the entry meanwhile: the delta no longer applies to what is held.
      if (current !== start) return readWhole(db, id)
      const entry = advanced(id, start, changes)
      remember(id, entry)
      return { entry }
    })
  }

  return {
    /** The entry held for a conversation, whatever its version (most recently read last). */
    peek(id: string): TreeEntry | undefined {
      const held = entries.get(id)
      if (held) {
        entries.delete(id)
        entries.set(id, held)
      }
      return held?.entry
    },
    load,
    refresh,
    /** The entry at the store's current version: one primary-key read while nothing changed. */
    async get(db: Db, id: string): Promise<TreeEntry> {
      const version = await conversationVersion(db, id)
      const entry = entries.get(id)?.entry
      return entry && entry.version === version ? entry : (await refresh(db, id)).entry
    },
    /** Posts held (a wire Post counting as WIRE_WEIGHT), for tests and metrics. */
    held: () => held,
  }
}

export type TreeCache = ReturnType<typeof createTreeCache>
