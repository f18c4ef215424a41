import type { StreamHub } from './stream.js'
import type { SimPost, World } from './world.js'

/** The world's new Posts, counted and handed to the open streams (each to the rules it matches). */
export class StreamFeed {
  /** Posts made since the simulator began (history excluded). */
  generated = 0

  constructor(
    private readonly world: World,
    private readonly hub: StreamHub,
  ) {}

  /** Makes `count` Posts at `atMs` (default now) and streams them. */
  emit(count: number, atMs?: number): SimPost[] {
    return this.deliver(this.world.generate(count, atMs))
  }

  /** Makes a reply in a conversation now and streams it. */
  reply(conversationId: string, parentId?: string): SimPost {
    const post = this.world.addReply(conversationId, parentId !== undefined ? { parentId } : {})
    return this.deliver([post])[0]!
  }

  /** See Simulator.burst: rendered for every stream first, then written as readers take them. */
  burst(count: number, atMs = Date.now()): number {
    const posts = this.world.generate(count, atMs)
    this.generated += posts.length
    const matched = this.hub.prepare(posts)
    this.hub.pump()
    return matched
  }

  private deliver(posts: SimPost[]): SimPost[] {
    this.generated += posts.length
    this.hub.deliver(posts)
    return posts
  }
}
