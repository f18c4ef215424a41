import {
  conversationVersion,
  readConversationSkeleton,
  type ConversationSkeleton,
  type Db,
} from '@threadline/db'
import {
  buildConversationTree,
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

function entryOf(id: string, skeleton: ConversationSkeleton): TreeEntry {
  const trees: Partial<Record<ConversationSort, ConversationTree>> = {}
  return {
    version: skeleton.version,
    reportedReplyCount: skeleton.reportedReplyCount,
    tree: (sort) => (trees[sort] ??= buildConversationTree(id, skeleton.rows, sort)),
  }
}

/**
 * Built conversation trees, kept per process by (conversation, version, sort) (docs/api.md §5).
 * The writer bumps a conversation's version in the transaction that changes it, so the pages of
 * a tree are cut from one build while nothing changes; a caller checks the version it holds
 * against the store's in the statement that reads the page (wirePostsAtVersion), or with `get`.
 */
export function createTreeCache(maxPosts = MAX_CACHED_POSTS) {
  const entries = new Map<string, { entry: TreeEntry; size: number }>()
  const reading = new Map<string, Promise<{ entry: TreeEntry; posts?: Map<string, string> }>>()
  let held = 0

  const remember = (id: string, entry: TreeEntry, size: number) => {
    const old = entries.get(id)
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

  /**
   * Reads and remembers a conversation's skeleton; with `posts`, also its Posts in wire form
   * when it holds at most `upTo` (see readConversationSkeleton). Concurrent reads of the same
   * kind share one statement.
   */
  const load = (db: Db, id: string, posts?: { fields: readonly string[]; upTo: number }) => {
    const key = posts ? `${id}:${posts.upTo}:${posts.fields.join(',')}` : id
    let pending = reading.get(key)
    if (!pending) {
      pending = readConversationSkeleton(db, id, posts)
        .then((skeleton) => {
          const entry = entryOf(id, skeleton)
          // A tree that came whole with its Posts is read as cheaply again as it would be from
          // here (one statement either way): only larger ones are kept.
          remember(id, entry, skeleton.posts ? 0 : skeleton.rows.ids.length)
          return { entry, ...(skeleton.posts ? { posts: skeleton.posts } : {}) }
        })
        .finally(() => reading.delete(key))
      reading.set(key, pending)
    }
    return pending
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
    /** The entry at the store's current version: one primary-key read while nothing changed. */
    async get(db: Db, id: string): Promise<TreeEntry> {
      const version = await conversationVersion(db, id)
      const entry = entries.get(id)?.entry
      return entry && entry.version === version ? entry : (await load(db, id)).entry
    },
    /** Posts held, for tests and metrics. */
    held: () => held,
  }
}

export type TreeCache = ReturnType<typeof createTreeCache>
