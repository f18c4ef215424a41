import type { Prng } from './prng.js'
import type { Plan } from './world-make.js'
import type { PostStore, SimPost } from './world-store.js'

/**
 * What the world makes next: roots, quotes, retweets and replies drawn from recent Posts, and a
 * steady share of replies in the demo conversations.
 */
export class Planner {
  /** Roots of the conversations that keep getting replies. */
  readonly demos: string[] = []

  constructor(
    private readonly prng: Prng,
    private readonly store: PostStore,
  ) {}

  next(): Plan {
    const { prng, store } = this
    const r = prng.next()
    if (this.demos.length > 0 && r < 0.08) {
      const parent = this.parentIn(prng.pick(this.demos))
      if (parent) return { kind: 'reply', parent }
    }
    const target = store.pickRecent(prng)
    if (!target || r < 0.3) {
      const quoted = target && prng.chance(0.1) ? target : undefined
      return quoted ? { kind: 'quote', quoted } : { kind: 'root' }
    }
    if (r < 0.35) return { kind: 'retweet', retweeted: target }
    // Replies: to the root of the target's conversation now and then, else to the target itself,
    // which gives both wide (many replies to the root) and deep (reply chains) trees.
    const root = store.get(target.conversationId)
    const parent = root && prng.chance(0.25) ? root : target
    const other = prng.chance(0.05) ? store.pickRecent(prng) : undefined
    const quoted = other && other.conversationId !== parent.conversationId ? other : undefined
    return quoted ? { kind: 'reply', parent, quoted } : { kind: 'reply', parent }
  }

  /** Chooses a parent inside a conversation: often the root, otherwise a recent Post of it. */
  parentIn(conversationId: string): SimPost | undefined {
    const { prng } = this
    const conv = this.store.conversation(conversationId)
    if (!conv || conv.length === 0) return undefined
    const root = conv[0]!.id === conversationId ? conv[0] : undefined
    if (root && prng.chance(0.3)) return root
    const window = Math.min(conv.length, 50)
    return conv[conv.length - 1 - Math.floor(prng.next() * window)]
  }
}
