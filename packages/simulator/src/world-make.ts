import type { Prng } from './prng.js'
import { buildText, pickLang } from './text.js'
import type { SnowflakeClock } from './world-ids.js'
import type { PostKind, PostStore, SimPost } from './world-store.js'
import type { SimUser } from './world-users.js'

/** What the next Post is, and the stored Posts it replies to, quotes or retweets. */
export interface Plan {
  kind: PostKind
  parent?: SimPost
  quoted?: SimPost
  retweeted?: SimPost
}

/** What every new Post starts from: its id and time, its author and its metrics. */
interface Birth {
  id: string
  ms: number
  author: SimUser
  created_at: string
  metrics: SimPost['wire']['public_metrics']
}

/** Makes the Posts a plan asks for, counts them on the Posts they reference, and stores them. */
export class PostMaker {
  // At benchmark rates many Posts share a millisecond: format each millisecond once.
  private isoMs = -1
  private iso = ''

  constructor(
    private readonly prng: Prng,
    private readonly users: readonly SimUser[],
    private readonly usersById: ReadonlyMap<string, SimUser>,
    private readonly store: PostStore,
    private readonly clock: SnowflakeClock,
  ) {}

  make(plan: Plan, atMs: number): SimPost {
    const { prng } = this
    const { id, ms } = this.clock.next(atMs)
    const author = this.pickAuthor()
    const created_at = this.isoAt(ms)
    const metrics = {
      retweet_count: 0,
      reply_count: 0,
      like_count: prng.pareto(1.3, 1) - 1,
      quote_count: 0,
      bookmark_count: prng.chance(0.1) ? prng.pareto(1.5, 1) : 0,
      impression_count: prng.pareto(1.1, 20),
    }
    const birth = { id, ms, author, created_at, metrics }
    const post =
      plan.kind === 'retweet' ? this.retweet(birth, plan.retweeted!) : this.original(birth, plan)
    this.store.add(post)
    return post
  }

  private pickAuthor(): SimUser {
    return this.users[this.prng.skewed(this.users.length, 2)]!
  }

  private isoAt(ms: number): string {
    if (ms !== this.isoMs) {
      this.isoMs = ms
      this.iso = new Date(ms).toISOString()
    }
    return this.iso
  }

  private retweet({ id, ms, author, created_at, metrics }: Birth, original: SimPost): SimPost {
    const originalAuthor = this.usersById.get(original.authorId)!
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
        mentions: [{ start: 3, end: 4 + originalAuthor.username.length, ...pick(originalAuthor) }],
      },
      possibly_sensitive: false,
      reply_settings: 'everyone',
    }
    this.store.bump(original.id, 'retweet_count')
    return {
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
  }

  /** A root, a reply or a quote (a reply may quote too). */
  private original({ id, ms, author, created_at, metrics }: Birth, plan: Plan): SimPost {
    const { prng } = this
    const lang = pickLang(prng)
    const parent = plan.parent
    const mentions = this.mentions(parent)
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
    if (parent) this.store.bump(parent.id, 'reply_count')
    if (plan.quoted) this.store.bump(plan.quoted.id, 'quote_count')
    return {
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
  }

  /** Who a new Post names: the author replied to, now and then the root's, now and then anyone. */
  private mentions(parent: SimPost | undefined): { username: string; id: string }[] {
    const { prng } = this
    const mentions: { username: string; id: string }[] = []
    if (parent) {
      const parentAuthor = this.usersById.get(parent.authorId)!
      mentions.push(pick(parentAuthor))
      const root = this.store.get(parent.conversationId)
      if (root && root.authorId !== parent.authorId && prng.chance(0.3)) {
        mentions.push(pick(this.usersById.get(root.authorId)!))
      }
    }
    if (prng.chance(0.1)) {
      const other = this.pickAuthor()
      if (!mentions.some((m) => m.id === other.id)) mentions.push(pick(other))
    }
    return mentions
  }
}

function pick(user: SimUser): { username: string; id: string } {
  return { username: user.username, id: user.id }
}

function uniq(ids: string[]): string[] {
  return ids.length < 2 ? ids : [...new Set(ids)]
}
