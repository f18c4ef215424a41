import { formatPostTime } from '@threadline/domain'
import { prng } from '@threadline/testing'

const TWEPOCH = 1288834974657n
const DAY_MS = 86_400_000

export interface GenPost {
  id: string
  conversationId: string
  parent: string | null
  author: string
  ms: number
  likes: number
  /** The Post it quotes as well, if any. */
  quoted?: string
  /** The root's reported reply count (other Posts: a small number). */
  replyCount: number
}

export interface ConversationFixture {
  rootId: string
  /** Every Post of the conversation, the never-stored one included. */
  posts: GenPost[]
  /** A parent that never arrives: its subtree stays orphaned. */
  missingId: string
  /** A parent sent last: its subtree is orphaned until it arrives. */
  lateId: string
  /** A Post of another conversation that quotes one of this one (it belongs to its own). */
  outsideQuote: GenPost
}

/**
 * A conversation shaped to exercise the tree (docs/api.md §5): a root a month older than its
 * replies, a deep chain, wide fans, siblings sharing a millisecond, replies that also quote,
 * a subtree under a parent that never arrives and one under a parent that arrives last. Ids are
 * snowflakes of created_at; likes are small so that `top` has ties.
 */
export function conversationFixture(
  seed: number,
  startMs = Date.UTC(2026, 10, 20),
): ConversationFixture {
  const random = prng(seed)
  let seq = 0n
  const idAt = (ms: number) => {
    seq = (seq + 1n) & 4095n
    return (((BigInt(ms) - TWEPOCH) << 22n) | seq).toString()
  }
  const author = () => String(5000 + Math.floor(random() * 40))
  const rootMs = startMs - 30 * DAY_MS
  const rootId = idAt(rootMs)
  const root: GenPost = {
    id: rootId,
    conversationId: rootId,
    parent: null,
    author: '5000',
    ms: rootMs,
    likes: 50,
    replyCount: 777,
  }
  const posts: GenPost[] = [root]
  let ms = startMs
  const reply = (parent: GenPost, sameMs = false): GenPost => {
    if (!sameMs) ms += 1 + Math.floor(random() * 900)
    const p: GenPost = {
      id: idAt(ms),
      conversationId: rootId,
      parent: parent.id,
      author: author(),
      ms,
      likes: Math.floor(random() * 6),
      replyCount: Math.floor(random() * 3),
    }
    posts.push(p)
    return p
  }
  const pick = () => posts[Math.floor(random() * posts.length)]!

  // A deep chain from the root.
  let chain = root
  const chainPosts: GenPost[] = []
  for (let i = 0; i < 160; i++) chainPosts.push((chain = reply(chain)))
  // Wide fans: under the root, and under a Post half way down the chain.
  for (let i = 0; i < 90; i++) reply(root)
  const mid = chainPosts[80]!
  for (let i = 0; i < 60; i++) reply(mid)
  // Siblings created in the same millisecond (ties broken by id).
  const tiesUnder = pick()
  reply(tiesUnder)
  for (let i = 0; i < 5; i++) reply(tiesUnder, true)
  // Random replies, biased to recent Posts so that more chains grow.
  for (let i = 0; i < 150; i++) {
    const window = Math.min(posts.length, 30)
    reply(posts[posts.length - 1 - Math.floor(random() * random() * window)]!)
  }
  // A parent that never arrives, with a subtree of its own (a chain and a fan).
  const missing = reply(pick())
  let below = reply(missing)
  for (let i = 0; i < 6; i++) below = reply(below)
  for (let i = 0; i < 4; i++) reply(missing)
  // A parent that arrives last, under the root, with a subtree.
  const late = reply(root)
  for (let i = 0; i < 8; i++) reply(i % 2 === 0 ? late : posts[posts.length - 1]!)
  // More random replies, some under the late and missing subtrees.
  for (let i = 0; i < 80; i++) reply(pick())
  // Replies that also quote another Post of the conversation.
  for (let i = 0; i < 12; i++) {
    const p = reply(pick())
    p.quoted = pick().id
  }
  ms += 1000
  const outsideId = idAt(ms)
  const outsideQuote: GenPost = {
    id: outsideId,
    conversationId: outsideId,
    parent: null,
    author: author(),
    ms,
    likes: 1,
    quoted: chainPosts[3]!.id,
    replyCount: 0,
  }
  return { rootId, posts, missingId: missing.id, lateId: late.id, outsideQuote }
}

/** A Post as the filtered stream sends it: one line with its author in includes. */
export function streamLine(p: GenPost): string {
  const refs = [
    ...(p.parent ? [{ type: 'replied_to', id: p.parent }] : []),
    ...(p.quoted ? [{ type: 'quoted', id: p.quoted }] : []),
  ]
  const data = {
    id: p.id,
    text: `post ${p.id}${p.parent ? ` replying to ${p.parent}` : ''}`,
    author_id: p.author,
    conversation_id: p.conversationId,
    created_at: formatPostTime(new Date(p.ms)),
    lang: 'en',
    edit_history_tweet_ids: [p.id],
    public_metrics: {
      retweet_count: 0,
      reply_count: p.replyCount,
      like_count: p.likes,
      quote_count: 0,
      bookmark_count: 0,
      impression_count: 10,
    },
    ...(p.parent ? { in_reply_to_user_id: '5000' } : {}),
    ...(refs.length > 0 ? { referenced_tweets: refs } : {}),
  }
  const users = [{ id: p.author, name: `User ${p.author}`, username: `user_${p.author}` }]
  return JSON.stringify({ data, includes: { users }, matching_rules: [{ id: '1', tag: '' }] })
}

export type Sort = 'oldest' | 'newest' | 'top'

export interface ExpectedNode {
  id: string
  thread: {
    depth: number
    parent_id?: string
    reply_count: number
    descendant_count: number
    missing_parent?: true
  }
  /** The parent not stored, for the page's errors. */
  missingParent?: string
}

const byId = (a: string, b: string) => (BigInt(a) < BigInt(b) ? -1 : BigInt(a) > BigInt(b) ? 1 : 0)

function comparator(sort: Sort): (a: GenPost, b: GenPost) => number {
  const oldest = (a: GenPost, b: GenPost) => a.ms - b.ms || byId(a.id, b.id)
  if (sort === 'oldest') return oldest
  if (sort === 'newest') return (a, b) => oldest(b, a)
  return (a, b) => b.likes - a.likes || oldest(a, b)
}

/**
 * The tree as the contract states it, built here independently of the server's code: recursive,
 * over the stored Posts, orphans (parent not stored) under the root after its own replies.
 */
export function expectedTree(rootId: string, stored: readonly GenPost[], sort: Sort) {
  const byKey = new Map(stored.map((p) => [p.id, p]))
  const kids = new Map<string, GenPost[]>()
  const orphans: GenPost[] = []
  for (const p of stored) {
    if (p.id === rootId) continue
    if (p.parent !== null && byKey.has(p.parent)) {
      const list = kids.get(p.parent) ?? []
      list.push(p)
      kids.set(p.parent, list)
    } else orphans.push(p)
  }
  const cmp = comparator(sort)
  const nodes: ExpectedNode[] = []
  const visit = (p: GenPost, depth: number): number => {
    const node: ExpectedNode = {
      id: p.id,
      thread: { depth, reply_count: 0, descendant_count: 0 },
    }
    if (p.id !== rootId && p.parent !== null) node.thread.parent_id = p.parent
    if (p.id !== rootId && (p.parent === null || !byKey.has(p.parent))) {
      node.thread.missing_parent = true
      if (p.parent !== null) node.missingParent = p.parent
    }
    nodes.push(node)
    const children = [...(kids.get(p.id) ?? [])].sort(cmp)
    node.thread.reply_count = children.length
    let below = 0
    for (const c of children) below += 1 + visit(c, depth + 1)
    node.thread.descendant_count = below
    return below
  }
  const root = byKey.get(rootId)
  if (root) visit(root, 0)
  for (const o of [...orphans].sort(cmp)) visit(o, 1)

  const missing = new Set(
    stored.flatMap((p) => (p.id !== rootId && p.parent && !byKey.has(p.parent) ? [p.parent] : [])),
  )
  const times = stored.map((p) => p.ms)
  const meta = {
    conversation_id: rootId,
    post_count: stored.length,
    reply_count: stored.filter((p) => p.id !== rootId && p.parent !== null).length,
    ...(root ? { reported_reply_count: root.replyCount } : {}),
    missing_count: missing.size,
    max_depth: Math.max(...nodes.map((n) => n.thread.depth)),
    participant_count: new Set(stored.map((p) => p.author)).size,
    first_created_at: formatPostTime(new Date(Math.min(...times))),
    last_created_at: formatPostTime(new Date(Math.max(...times))),
  }
  return { nodes, meta, rootStored: root !== undefined }
}

/** The errors a page of the tree carries: its orphans' missing parents once, the root on page 1. */
export function expectedErrors(
  rootId: string,
  rootStored: boolean,
  page: readonly ExpectedNode[],
  first: boolean,
): Array<{ parameter: string; resource_id: string }> {
  const out: Array<{ parameter: string; resource_id: string }> = []
  const seen = new Set<string>()
  if (!rootStored && first) {
    seen.add(rootId)
    out.push({ parameter: 'conversation_id', resource_id: rootId })
  }
  for (const n of page) {
    if (n.missingParent === undefined || seen.has(n.missingParent)) continue
    seen.add(n.missingParent)
    out.push({ parameter: 'parent_id', resource_id: n.missingParent })
  }
  return out
}
