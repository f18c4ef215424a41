import { Prng } from './prng.js'
import { SnowflakeClock } from './world-ids.js'
import { PostMaker } from './world-make.js'
import { Planner } from './world-plan.js'
import { PostStore, type SimPost } from './world-store.js'
import { createUsers, type SimUser } from './world-users.js'

export type { PostKind, SimPost } from './world-store.js'
export type { SimUser } from './world-users.js'

const DAY_MS = 86_400_000

export interface WorldOptions {
  seed: number
  /** Start of live time; the history ends here. Defaults to now. */
  now?: number
  users?: number
  historyPosts?: number
  historyDays?: number
  /** Conversations that keep getting replies, for demos (their roots are made in the history). */
  demoConversations?: number
  /** Older Posts are forgotten past this count, so a long benchmark's memory stays bounded. */
  maxPosts?: number
}

export interface World {
  readonly seed: number
  readonly startMs: number
  readonly users: readonly SimUser[]
  user(id: string): SimUser | undefined
  get(id: string): SimPost | undefined
  /** Posts of a conversation, oldest first (the root, unless evicted, first). */
  conversation(id: string): readonly SimPost[] | undefined
  /** Every stored Post, newest first, starting below `beforeId`'s position when given. */
  newestFirst(): Iterable<SimPost>
  /** Stored Posts created at or after `ms`, oldest first. */
  since(ms: number): SimPost[]
  readonly size: number
  /** The next `count` Posts of the world, created at `atMs` (default now). */
  generate(count: number, atMs?: number): SimPost[]
  /** A new root Post. */
  addRoot(atMs?: number): SimPost
  /** A reply in a conversation, to `parentId` or to a Post of it chosen by the world. */
  addReply(conversationId: string, options?: { parentId?: string; atMs?: number }): SimPost
  demoConversations(): string[]
  /** Serialisation of a Post with every field (cached). */
  json(post: SimPost): string
}

/** Builds a deterministic world: the same seed and `now` give the same users and history. */
export function createWorld(options: WorldOptions): World {
  const prng = new Prng(options.seed)
  const startMs = options.now ?? Date.now()
  const users = createUsers(prng, options.users ?? 2000, startMs)
  const usersById = new Map(users.map((u) => [u.id, u]))
  const store = new PostStore(options.maxPosts ?? 200_000)
  const clock = new SnowflakeClock(BigInt(options.seed & 1023))
  const maker = new PostMaker(prng, users, usersById, store, clock)
  const planner = new Planner(prng, store)
  makeHistory(options, startMs, prng, maker, planner)

  return {
    seed: options.seed,
    startMs,
    users,
    user: (id) => usersById.get(id),
    get: (id) => store.get(id),
    conversation: (id) => store.conversation(id),
    newestFirst: () => store.newestFirst(),
    since: (ms) => store.since(ms),
    get size() {
      return store.size
    },
    generate(count, atMs = Date.now()) {
      const out: SimPost[] = new Array<SimPost>(count)
      for (let i = 0; i < count; i++) out[i] = maker.make(planner.next(), atMs)
      return out
    },
    addRoot: (atMs = Date.now()) => maker.make({ kind: 'root' }, atMs),
    addReply(conversationId, { parentId, atMs = Date.now() } = {}) {
      const parent = parentId !== undefined ? store.get(parentId) : planner.parentIn(conversationId)
      if (!parent || parent.conversationId !== conversationId) {
        throw new Error(`no Post to reply to in conversation ${conversationId}`)
      }
      return maker.make({ kind: 'reply', parent }, atMs)
    },
    demoConversations: () => planner.demos.filter((id) => store.conversation(id) !== undefined),
    json(post) {
      return (post.json ??= JSON.stringify(post.wire))
    },
  }
}

/**
 * The history: evenly spread (with jitter) over the days before start; the demo roots sit at fixed
 * fractions of it so that one of them is older than the 7-day search window.
 */
function makeHistory(
  options: WorldOptions,
  startMs: number,
  prng: Prng,
  maker: PostMaker,
  planner: Planner,
): void {
  const historyPosts = options.historyPosts ?? 20_000
  const demoCount = options.demoConversations ?? 3
  const historyStart = startMs - (options.historyDays ?? 10) * DAY_MS
  const span = startMs - historyStart
  const demoAt = new Set<number>()
  for (let d = 0; d < demoCount; d++) {
    demoAt.add(Math.floor(historyPosts * [0.02, 0.5, 0.9, 0.7, 0.3][d % 5]!) + d)
  }
  for (let i = 0; i < historyPosts; i++) {
    const ms = Math.floor(historyStart + (span * (i + prng.next() * 0.999)) / historyPosts)
    if (demoAt.has(i)) planner.demos.push(maker.make({ kind: 'root' }, ms).id)
    else maker.make(planner.next(), ms)
  }
}
