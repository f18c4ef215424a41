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

/**
 * Posts of built trees a process keeps, over all conversations: a tree costs a few hundred bytes
 * a Post, and the least recently read conversations go first.
 */
const MAX_CACHED_POSTS = 400_000

/** One conversation's skeleton at one version, and its trees built so far (one per sort). */
export interface TreeEntry {
  version: string
  reportedReplyCount: number | undefined
  tree(sort: ConversationSort): ConversationTree
}

interface HeldEntry extends TreeEntry {
  /** The snapshot the skeleton is up to date with. */
  snapshot: string
  skeleton: HeldSkeleton
  /** Rows of the skeleton at this version (it may have grown since, for a later version). */
  size: number
  trees: Partial<Record<ConversationSort, ConversationTree>>
}

function entryOf(
  id: string,
  read: ConversationSkeleton,
  skeleton: HeldSkeleton,
  trees: HeldEntry['trees'] = {},
): HeldEntry {
  const size = skeleton.size
  return {
    version: read.version,
    snapshot: read.snapshot,
    reportedReplyCount: read.reportedReplyCount,
    skeleton,
    size,
    trees,
    tree(sort) {
      return (trees[sort] ??= buildConversationTree(id, skeleton, sort, size))
    },
  }
}

/** The entry after the Posts changed since `held` was read: its trees extended where they can be. */
function advanced(id: string, held: HeldEntry, changes: ConversationSkeleton): HeldEntry {
  if (changes.rows.ids.length === 0) return entryOf(id, changes, held.skeleton, held.trees)
  const { skeleton, appendedFrom } = held.skeleton.apply(changes.rows)
  const trees: HeldEntry['trees'] = {}
  if (appendedFrom !== undefined) {
    for (const sort of ['oldest', 'newest'] as const) {
      const tree = held.trees[sort]
      const extended = tree && extendConversationTree(tree, skeleton, appendedFrom)
      if (extended) trees[sort] = extended
    }
  }
  return entryOf(id, changes, skeleton, trees)
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

  const remember = (id: string, entry: HeldEntry, size: number) => {
    const old = entries.get(id)
    if (old && newer(old.entry.version, entry.version)) return
    if (old) {
      held -= old.size
      entries.delete(id)
    }
    if (size === 0) return
    entries.set(id, { entry, size })
    held += size
    for (const [key, e] of entries) {
      if (held <= maxPosts || key === id) break
      entries.delete(key)
      held -= e.size
    }
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
    remember(id, entry, read.posts ? 0 : read.rows.ids.length)
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
      remember(id, entry, entry.size)
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
    /** Posts held, for tests and metrics. */
    held: () => held,
  }
}

export type TreeCache = ReturnType<typeof createTreeCache>
