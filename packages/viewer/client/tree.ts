import type { Post, User } from './wire.js'

/**
 * A conversation as the viewer holds it: stored Posts, and placeholders for parents that are not
 * stored (docs/api.md §6). The API sends the tree in depth-first order, page by page; the live
 * feed adds Posts anywhere in it.
 */

export type Sort = 'oldest' | 'newest' | 'top'

export interface Node {
  id: string
  /** Absent on a placeholder for a parent that is not stored. */
  post?: Post
  parent?: Node
  children: Node[]
  /** The API's `thread.depth`; a placeholder takes the depth of the orphans it holds. */
  depth: number
  /** Posts stored below it (the API's `descendant_count`, plus live arrivals). */
  descendants: number
  collapsed: boolean
  fresh: boolean
}

export class Conversation {
  readonly nodes = new Map<string, Node>()
  readonly users = new Map<string, User>()
  /** The conversation's root: the stored root Post, or a placeholder when it is not stored. */
  root: Node
  rootAuthorId: string | undefined

  constructor(
    readonly id: string,
    readonly sort: Sort,
  ) {
    this.root = this.placeholder(id, undefined, 0)
  }

  addUsers(users: readonly User[]): void {
    for (const user of users) this.users.set(user.id, user)
  }

  private placeholder(id: string, parent: Node | undefined, depth: number): Node {
    const node: Node = {
      id,
      parent,
      children: [],
      depth,
      descendants: 0,
      collapsed: false,
      fresh: false,
    }
    this.nodes.set(id, node)
    return node
  }

  /**
   * Adds one Post of a tree page (in the page's order, so its parent came first), and returns the
   * node, or undefined when it is already shown.
   */
  addFromTree(post: Post): Node | undefined {
    const existing = this.nodes.get(post.id)
    if (existing?.post) return undefined
    const thread = post.thread ?? { depth: post.id === this.id ? 0 : 1 }
    if (post.id === this.id || thread.depth === 0) {
      this.root.post = post
      this.root.descendants = thread.descendant_count ?? 0
      this.rootAuthorId = post.author_id
      return this.root
    }
    const parentId = thread.parent_id
    // An orphan (its parent not stored) goes under that parent's placeholder, as a child of the
    // root; so does a reply whose parent this view has not seen, rather than being dropped.
    const parent =
      parentId === undefined
        ? this.root
        : thread.missing_parent
          ? this.orphanSlot(parentId)
          : (this.nodes.get(parentId) ?? this.orphanSlot(parentId))
    const node: Node = {
      id: post.id,
      post,
      parent,
      children: [],
      depth: thread.depth,
      descendants: thread.descendant_count ?? 0,
      collapsed: false,
      fresh: false,
    }
    this.nodes.set(post.id, node)
    parent.children.push(node)
    return node
  }

  /** The placeholder that holds the orphans of a parent that is not stored (after real replies). */
  private orphanSlot(parentId: string): Node {
    return this.nodes.get(parentId) ?? this.appendPlaceholder(parentId)
  }

  private appendPlaceholder(parentId: string): Node {
    const slot = this.placeholder(parentId, this.root, 1)
    this.root.children.push(slot)
    return slot
  }

  /**
   * Adds a Post from the live feed under its parent, where the sort puts a new reply; returns it,
   * or undefined when it is shown already or its parent is not known yet (`orphan` then says
   * whether to show it under a placeholder anyway, once every page is loaded).
   */
  addLive(post: Post, orphan: boolean): Node | undefined {
    if (this.nodes.get(post.id)?.post) return undefined
    if (post.id === this.id) {
      if (this.root.post) return undefined
      this.root.post = post
      this.rootAuthorId = post.author_id
      return this.root
    }
    const parentId =
      post.referenced_tweets?.find((r) => r.type === 'replied_to')?.id ?? post.thread?.parent_id
    let parent = parentId === undefined ? this.root : this.nodes.get(parentId)
    if (!parent) {
      if (!orphan) return undefined
      parent = this.orphanSlot(parentId!)
    }
    const depth = parent.post || parent === this.root ? parent.depth + 1 : parent.depth
    const node: Node = {
      id: post.id,
      post: {
        ...post,
        thread: { depth, parent_id: parentId, reply_count: 0, descendant_count: 0 },
      },
      parent,
      children: [],
      depth,
      descendants: 0,
      collapsed: false,
      fresh: true,
    }
    this.nodes.set(post.id, node)
    parent.children.splice(this.insertionIndex(parent), 0, node)
    for (let up: Node | undefined = parent; up; up = up.parent) {
      if (up.post || up === this.root) up.descendants++
      if (up === this.root) break
    }
    return node
  }

  /** Where a new reply goes among its siblings: first when newest first, else after the real ones. */
  private insertionIndex(parent: Node): number {
    if (this.sort === 'newest') return 0
    const firstPlaceholder = parent.children.findIndex((c) => !c.post && c.children.length > 0)
    return firstPlaceholder < 0 ? parent.children.length : firstPlaceholder
  }

  /** Posts below a node that this view holds (a placeholder has no count of its own). */
  hiddenCount(node: Node): number {
    if (node.post) return Math.max(node.descendants, countLoaded(node))
    return countLoaded(node)
  }
}

function countLoaded(node: Node): number {
  let n = 0
  const stack = [...node.children]
  while (stack.length > 0) {
    const next = stack.pop()!
    if (next.post) n++
    stack.push(...next.children)
  }
  return n
}

/** X sends text with `&`, `<` and `>` escaped; the page shows it as typed. */
export function postText(text: string): string {
  return text.replace(/&(amp|lt|gt);/g, (_, name: string) =>
    name === 'amp' ? '&' : name === 'lt' ? '<' : '>',
  )
}
