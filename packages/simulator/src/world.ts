import type { WirePost, WireUser } from '@threadline/domain'
import { Prng } from './prng.js'
import { buildText, pickLang, userDescription, userName } from './text.js'

const TWEPOCH = 1288834974657
const DAY_MS = 86_400_000

export interface SimUser {
  id: string
  username: string
  wire: WireUser
  /** The user with every field, serialised once: users never change after creation. */
  json: string
}

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
  const userCount = options.users ?? 2000
  const historyPosts = options.historyPosts ?? 20_000
  const historyDays = options.historyDays ?? 10
  const demoCount = options.demoConversations ?? 3
  const maxPosts = options.maxPosts ?? 200_000
  const worker = BigInt(options.seed & 1023)

  const users: SimUser[] = []
  const usersById = new Map<string, SimUser>()
  const byId = new Map<string, SimPost>()
  const conversations = new Map<string, SimPost[]>()
  let ordered: SimPost[] = []
  let head = 0
  // Recent Posts that replies, quotes and retweets pick from: a conversation gets replies in
  // proportion to its recent activity, which gives heavy-tailed sizes (a Yule process).
  const RING = 5000
  const ring: SimPost[] = []
  let ringAt = 0
  const demos: string[] = []

  let lastMs = 0
  let seq = 0
  function nextId(ms: number): { id: string; ms: number } {
    if (ms < lastMs) ms = lastMs
    if (ms === lastMs) {
      seq++
      if (seq > 4095) {
        ms++
        seq = 0
      }
    } else seq = 0
    lastMs = ms
    const id = ((BigInt(ms - TWEPOCH) << 22n) | (worker << 12n) | BigInt(seq)).toString()
    return { id, ms }
  }

  // Users: created between 2011 and a year before start, snowflake ids of their creation time.
  const usernames = new Set<string>()
  for (let i = 0; i < userCount; i++) {
    const createdMs = prng.int(1_300_000_000_000, startMs - 365 * DAY_MS)
    const id = (
      (BigInt(createdMs - TWEPOCH) << 22n) |
      (BigInt(prng.int(0, 1023)) << 12n) |
      BigInt(i % 4096)
    ).toString()
    const name = userName(prng)
    let username = name
      .toLowerCase()
      .replace(/[^a-z]/g, '_')
      .slice(0, 10)
    while (usernames.has(username)) username = `${username.slice(0, 10)}${prng.int(0, 99999)}`
    usernames.add(username)
    const followers = prng.pareto(1.1, 20)
    const verified = prng.chance(0.03)
    const wire: WireUser = {
      id,
      name,
      username,
      created_at: new Date(createdMs).toISOString(),
      description: userDescription(prng),
      location: prng.chance(0.4) ? prng.pick(['Lisbon', 'Tokyo', 'Berlin', 'Lagos', 'Lima']) : '',
      url: '',
      profile_image_url: `https://pbs.example.com/profile_images/${id}/normal.jpg`,
      protected: false,
      verified,
      verified_type: verified ? 'blue' : 'none',
      public_metrics: {
        followers_count: followers,
        following_count: prng.pareto(1.5, 30),
        tweet_count: prng.pareto(1.2, 50),
        listed_count: Math.floor(followers / 100),
        like_count: prng.pareto(1.2, 100),
      },
    }
    const user: SimUser = { id, username, wire, json: JSON.stringify(wire) }
    users.push(user)
    usersById.set(id, user)
  }

  // At benchmark rates many Posts share a millisecond: format each millisecond once.
  let isoMs = -1
  let iso = ''
  const isoAt = (ms: number) =>
    ms === isoMs ? iso : ((isoMs = ms), (iso = new Date(ms).toISOString()))

  const pickAuthor = () => users[prng.skewed(users.length, 2)]!
  const alive = (p: SimPost | undefined): p is SimPost => p !== undefined && !p.evicted

  function ringPick(): SimPost | undefined {
    if (ring.length === 0) return undefined
    const p = ring[Math.floor(prng.next() * ring.length)]
    return alive(p) ? p : undefined
  }

  function store(post: SimPost) {
    byId.set(post.id, post)
    ordered.push(post)
    let conv = conversations.get(post.conversationId)
    if (!conv) conversations.set(post.conversationId, (conv = []))
    conv.push(post)
    if (post.kind !== 'retweet') {
      if (ring.length < RING) ring.push(post)
      else ring[ringAt] = post
      ringAt = (ringAt + 1) % RING
    }
    while (ordered.length - head > maxPosts) evict()
  }

  function evict() {
    const old = ordered[head]!
    head++
    old.evicted = true
    byId.delete(old.id)
    const conv = conversations.get(old.conversationId)
    if (conv) {
      // The oldest Post overall is also the oldest of its conversation.
      if (conv[0] === old) conv.shift()
      if (conv.length === 0) conversations.delete(old.conversationId)
    }
    if (head > 1024 && head * 2 > ordered.length) {
      ordered = ordered.slice(head)
      head = 0
    }
  }

  function bump(id: string | undefined, metric: 'reply_count' | 'quote_count' | 'retweet_count') {
    const p = id === undefined ? undefined : byId.get(id)
    if (!p) return
    p.wire.public_metrics[metric]++
    p.json = undefined
  }

  interface Plan {
    kind: PostKind
    parent?: SimPost
    quoted?: SimPost
    retweeted?: SimPost
  }

  function make(plan: Plan, atMs: number): SimPost {
    const { id, ms } = nextId(atMs)
    const author = pickAuthor()
    const created_at = isoAt(ms)
    const metrics = {
      retweet_count: 0,
      reply_count: 0,
      like_count: prng.pareto(1.3, 1) - 1,
      quote_count: 0,
      bookmark_count: prng.chance(0.1) ? prng.pareto(1.5, 1) : 0,
      impression_count: prng.pareto(1.1, 20),
    }
    let post: SimPost
    if (plan.kind === 'retweet') {
      const original = plan.retweeted!
      const originalAuthor = usersById.get(original.authorId)!
      const text = `RT @${originalAuthor.username}: ${original.wire.text}`.slice(0, 280)
      const wire: SimPost['wire'] = {
        id,
        text,
        author_id: author.id,
        conversation_id: id,
        created_at,
        referenced_tweets: [{ type: 'retweeted', id: original.id }],
        public_metrics: { ...metrics, like_count: 0, impression_count: 0 },
        lang: original.wire.lang ?? 'en',
        edit_history_tweet_ids: [id],
        entities: {
          mentions: [
            { start: 3, end: 4 + originalAuthor.username.length, ...pick(originalAuthor) },
          ],
        },
        possibly_sensitive: false,
        reply_settings: 'everyone',
      }
      post = {
        id,
        createdMs: ms,
        conversationId: id,
        authorId: author.id,
        kind: 'retweet',
        retweetedId: original.id,
        depth: 0,
        refIds: [original.id],
        userIds: uniq([author.id, original.authorId]),
        wire,
      }
      bump(original.id, 'retweet_count')
    } else {
      const lang = pickLang(prng)
      const parent = plan.parent
      const mentions: { username: string; id: string }[] = []
      if (parent) {
        const parentAuthor = usersById.get(parent.authorId)!
        mentions.push(pick(parentAuthor))
        const root = byId.get(parent.conversationId)
        if (root && root.authorId !== parent.authorId && prng.chance(0.3)) {
          mentions.push(pick(usersById.get(root.authorId)!))
        }
      }
      if (prng.chance(0.1)) {
        const other = pickAuthor()
        if (!mentions.some((m) => m.id === other.id)) mentions.push(pick(other))
      }
      const { text, entities } = buildText(prng, {
        mentions,
        lang,
        hashtags: prng.chance(0.2) ? prng.int(1, 3) : 0,
        url: prng.chance(0.1) || plan.quoted !== undefined,
      })
      const refs: { type: 'replied_to' | 'quoted'; id: string }[] = []
      if (parent) refs.push({ type: 'replied_to', id: parent.id })
      if (plan.quoted) refs.push({ type: 'quoted', id: plan.quoted.id })
      const conversationId = parent ? parent.conversationId : id
      const wire: SimPost['wire'] = {
        id,
        text,
        author_id: author.id,
        conversation_id: conversationId,
        created_at,
        ...(parent ? { in_reply_to_user_id: parent.authorId } : {}),
        ...(refs.length > 0 ? { referenced_tweets: refs } : {}),
        public_metrics: metrics,
        lang,
        edit_history_tweet_ids: [id],
        ...(entities ? { entities } : {}),
        possibly_sensitive: false,
        reply_settings: 'everyone',
        edit_controls: {
          edits_remaining: 5,
          is_edit_eligible: true,
          editable_until: new Date(ms + 3_600_000).toISOString(),
        },
      }
      const quotedAuthor = plan.quoted?.authorId
      post = {
        id,
        createdMs: ms,
        conversationId,
        authorId: author.id,
        kind: parent ? 'reply' : plan.quoted ? 'quote' : 'root',
        ...(parent ? { parentId: parent.id } : {}),
        ...(plan.quoted ? { quotedId: plan.quoted.id } : {}),
        depth: parent ? parent.depth + 1 : 0,
        refIds: refs.map((r) => r.id),
        userIds: uniq([
          author.id,
          ...(parent ? [parent.authorId] : []),
          ...(quotedAuthor ? [quotedAuthor] : []),
          ...mentions.map((m) => m.id),
        ]),
        wire,
      }
      if (parent) bump(parent.id, 'reply_count')
      if (plan.quoted) bump(plan.quoted.id, 'quote_count')
    }
    store(post)
    return post
  }

  /** Chooses a parent inside a conversation: often the root, otherwise a recent Post of it. */
  function parentIn(conversationId: string): SimPost | undefined {
    const conv = conversations.get(conversationId)
    if (!conv || conv.length === 0) return undefined
    const root = conv[0]!.id === conversationId ? conv[0] : undefined
    if (root && prng.chance(0.3)) return root
    const window = Math.min(conv.length, 50)
    return conv[conv.length - 1 - Math.floor(prng.next() * window)]
  }

  function planNext(): Plan {
    const r = prng.next()
    if (demos.length > 0 && r < 0.08) {
      const parent = parentIn(prng.pick(demos))
      if (parent) return { kind: 'reply', parent }
    }
    const target = ringPick()
    if (!target || r < 0.3) {
      const quoted = target && prng.chance(0.1) ? target : undefined
      return quoted ? { kind: 'quote', quoted } : { kind: 'root' }
    }
    if (r < 0.35) return { kind: 'retweet', retweeted: target }
    // Replies: to the root of the target's conversation now and then, else to the target itself,
    // which gives both wide (many replies to the root) and deep (reply chains) trees.
    const root = byId.get(target.conversationId)
    const parent = root && prng.chance(0.25) ? root : target
    const other = prng.chance(0.05) ? ringPick() : undefined
    const quoted = other && other.conversationId !== parent.conversationId ? other : undefined
    return quoted ? { kind: 'reply', parent, quoted } : { kind: 'reply', parent }
  }

  // History: evenly spread (with jitter) over the days before start; the demo roots sit at fixed
  // fractions of it so that one of them is older than the 7-day search window.
  const historyStart = startMs - historyDays * DAY_MS
  const span = startMs - historyStart
  const demoAt = new Set<number>()
  for (let d = 0; d < demoCount; d++) {
    demoAt.add(Math.floor(historyPosts * [0.02, 0.5, 0.9, 0.7, 0.3][d % 5]!) + d)
  }
  for (let i = 0; i < historyPosts; i++) {
    const ms = Math.floor(historyStart + (span * (i + prng.next() * 0.999)) / historyPosts)
    if (demoAt.has(i)) demos.push(make({ kind: 'root' }, ms).id)
    else make(planNext(), ms)
  }

  return {
    seed: options.seed,
    startMs,
    users,
    user: (id) => usersById.get(id),
    get: (id) => byId.get(id),
    conversation: (id) => conversations.get(id),
    *newestFirst() {
      for (let i = ordered.length - 1; i >= head; i--) yield ordered[i]!
    },
    since(ms) {
      let lo = head
      let hi = ordered.length
      while (lo < hi) {
        const mid = (lo + hi) >>> 1
        if (ordered[mid]!.createdMs < ms) lo = mid + 1
        else hi = mid
      }
      return ordered.slice(lo)
    },
    get size() {
      return ordered.length - head
    },
    generate(count, atMs = Date.now()) {
      const out: SimPost[] = new Array<SimPost>(count)
      for (let i = 0; i < count; i++) out[i] = make(planNext(), atMs)
      return out
    },
    addRoot: (atMs = Date.now()) => make({ kind: 'root' }, atMs),
    addReply(conversationId, { parentId, atMs = Date.now() } = {}) {
      const parent = parentId !== undefined ? byId.get(parentId) : parentIn(conversationId)
      if (!parent || parent.conversationId !== conversationId) {
        throw new Error(`no Post to reply to in conversation ${conversationId}`)
      }
      return make({ kind: 'reply', parent }, atMs)
    },
    demoConversations: () => demos.filter((id) => conversations.has(id)),
    json(post) {
      return (post.json ??= JSON.stringify(post.wire))
    },
  }
}

function pick(user: SimUser): { username: string; id: string } {
  return { username: user.username, id: user.id }
}

function uniq(ids: string[]): string[] {
  return ids.length < 2 ? ids : [...new Set(ids)]
}
