import type { WirePost } from '@threadline/domain'
import type { Prng } from './prng.js'

export type PostKind = 'root' | 'reply' | 'quote' | 'retweet'

export interface SimPost {
  id: string
  createdMs: number
  conversationId: string
  authorId: string
  kind: PostKind
  /** The Post this one replies to, quotes or retweets (a reply that quotes has both). */
  parentId?: string
  quotedId?: string
  retweetedId?: string
  depth: number
  /** Ids of Posts that `referenced_tweets.id` expands to. */
  refIds: string[]
  /** Users named by this Post, in X's expansion order (author, replied-to, referenced authors, mentions). */
  userIds: string[]
  wire: WirePost & { public_metrics: NonNullable<WirePost['public_metrics']> }
  /** Cached serialisation with every field; dropped when the metrics change. */
  json?: string
  evicted?: boolean
}

// Recent Posts that replies, quotes and retweets pick from: a conversation gets replies in
// proportion to its recent activity, which gives heavy-tailed sizes (a Yule process).
const RING = 5000

/**
 * The world's Posts: by id, by conversation and in creation order, the oldest forgotten past
 * `maxPosts`; and a ring of recent ones to pick from.
 */
export class PostStore {
  private readonly byId = new Map<string, SimPost>()
  private readonly conversations = new Map<string, SimPost[]>()
  private ordered: SimPost[] = []
  private head = 0
  private readonly ring: SimPost[] = []
  private ringAt = 0

  constructor(private readonly maxPosts: number) {}

  get(id: string): SimPost | undefined {
    return this.byId.get(id)
  }

  /** Posts of a conversation, oldest first (the root, unless evicted, first). */
  conversation(id: string): SimPost[] | undefined {
    return this.conversations.get(id)
  }

  get size(): number {
    return this.ordered.length - this.head
  }

  *newestFirst(): Iterable<SimPost> {
    for (let i = this.ordered.length - 1; i >= this.head; i--) yield this.ordered[i]!
  }

  /** Stored Posts created at or after `ms`, oldest first. */
  since(ms: number): SimPost[] {
    let lo = this.head
    let hi = this.ordered.length
    while (lo < hi) {
      const mid = (lo + hi) >>> 1
      if (this.ordered[mid]!.createdMs < ms) lo = mid + 1
      else hi = mid
    }
    return this.ordered.slice(lo)
  }

  /** A recent Post, at random; undefined when none, or when the one drawn was forgotten. */
  pickRecent(prng: Prng): SimPost | undefined {
    if (this.ring.length === 0) return undefined
    const p = this.ring[Math.floor(prng.next() * this.ring.length)]
    return p !== undefined && !p.evicted ? p : undefined
  }

  add(post: SimPost): void {
    this.byId.set(post.id, post)
    this.ordered.push(post)
    let conv = this.conversations.get(post.conversationId)
    if (!conv) this.conversations.set(post.conversationId, (conv = []))
    conv.push(post)
    if (post.kind !== 'retweet') {
      if (this.ring.length < RING) this.ring.push(post)
      else this.ring[this.ringAt] = post
      this.ringAt = (this.ringAt + 1) % RING
    }
    while (this.ordered.length - this.head > this.maxPosts) this.evict()
  }

  /** One more reply, quote or retweet of a stored Post (its cached serialisation is dropped). */
  bump(id: string | undefined, metric: 'reply_count' | 'quote_count' | 'retweet_count'): void {
    const p = id === undefined ? undefined : this.byId.get(id)
    if (!p) return
    p.wire.public_metrics[metric]++
    p.json = undefined
  }

  private evict(): void {
    const old = this.ordered[this.head]!
    this.head++
    old.evicted = true
    this.byId.delete(old.id)
    const conv = this.conversations.get(old.conversationId)
    if (conv) {
      // The oldest Post overall is also the oldest of its conversation.
      if (conv[0] === old) conv.shift()
      if (conv.length === 0) this.conversations.delete(old.conversationId)
    }
    if (this.head > 1024 && this.head * 2 > this.ordered.length) {
      this.ordered = this.ordered.slice(this.head)
      this.head = 0
    }
  }
}
