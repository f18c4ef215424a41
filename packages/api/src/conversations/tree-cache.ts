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

interface Entry {
  version: string
  skeleton: ConversationSkeleton
  trees: Partial<Record<ConversationSort, ConversationTree>>
}

export interface CachedTree {
  tree: ConversationTree
  reportedReplyCount: number | undefined
}

/**
 * Built conversation trees, kept per process by (conversation, version, sort) (docs/api.md §5).
 * The writer bumps a conversation's version in the transaction that changes it, so a request
 * costs one primary-key read while nothing changed, and the pages of a large tree are cut from
 * one build. Concurrent requests for the same version share one read.
 */
export function createTreeCache(maxPosts = MAX_CACHED_POSTS) {
  const entries = new Map<string, Entry>()
  const reading = new Map<string, Promise<Entry>>()
  let held = 0

  const remember = (id: string, entry: Entry) => {
    const old = entries.get(id)
    if (old) {
      held -= old.skeleton.rows.ids.length
      entries.delete(id)
    }
    entries.set(id, entry)
    held += entry.skeleton.rows.ids.length
    for (const [key, e] of entries) {
      if (held <= maxPosts || key === id) break
      entries.delete(key)
      held -= e.skeleton.rows.ids.length
    }
  }

  const load = (db: Db, id: string, version: string): Promise<Entry> => {
    const key = `${id}:${version}`
    let pending = reading.get(key)
    if (!pending) {
      pending = readConversationSkeleton(db, id)
        .then((skeleton) => {
          const entry: Entry = { version: skeleton.version, skeleton, trees: {} }
          if (skeleton.rows.ids.length > 0) remember(id, entry)
          return entry
        })
        .finally(() => reading.delete(key))
      reading.set(key, pending)
    }
    return pending
  }

  return {
    async get(db: Db, id: string, sort: ConversationSort): Promise<CachedTree> {
      const version = await conversationVersion(db, id)
      let entry = entries.get(id)
      if (entry && entry.version === version) {
        // Most recently read last, for eviction.
        entries.delete(id)
        entries.set(id, entry)
      } else {
        entry = await load(db, id, version)
      }
      const tree = (entry.trees[sort] ??= buildConversationTree(id, entry.skeleton.rows, sort))
      return { tree, reportedReplyCount: entry.skeleton.reportedReplyCount }
    },
    /** Posts held, for tests and metrics. */
    held: () => held,
  }
}

export type TreeCache = ReturnType<typeof createTreeCache>
