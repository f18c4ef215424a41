import { formatPostTime, snowflakeTime } from '@threadline/domain'

/** A small deterministic PRNG (mulberry32), so generated data repeats for a seed. */
export function prng(seed: number): () => number {
  let a = seed >>> 0
  return () => {
    a = (a + 0x6d2b79f5) >>> 0
    let t = a
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

export function shuffle<T>(items: readonly T[], random: () => number): T[] {
  const out = [...items]
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(random() * (i + 1))
    ;[out[i], out[j]] = [out[j]!, out[i]!]
  }
  return out
}

const TWEPOCH = 1288834974657n

/**
 * A conversation of `size` Posts as filtered-stream lines: deep reply branches (each reply picks a
 * parent among recent Posts, biased to the newest, so chains run deep), quotes of earlier Posts, and
 * users in `includes`. Ids are snowflakes that increase with created_at.
 */
export function generateConversation(options: {
  size: number
  seed?: number
  startMs?: number
  users?: number
  /** Padding that brings each line to a realistic ~1 KB. */
  padding?: boolean
}): { rootId: string; lines: string[]; ids: string[] } {
  const random = prng(options.seed ?? 1)
  const users = Array.from({ length: options.users ?? 50 }, (_, i) => ({
    id: String(1000 + i),
    name: `User ${i}`,
    username: `user_${i}`,
  }))
  let ms = options.startMs ?? Date.UTC(2026, 10, 1)
  let seq = 0n
  const posts: Array<{ id: string; author: (typeof users)[number] }> = []
  const lines: string[] = []
  let rootId = ''
  for (let i = 0; i < options.size; i++) {
    ms += 1 + Math.floor(random() * 2000)
    seq = (seq + 1n) & 4095n
    const id = (((BigInt(ms) - TWEPOCH) << 22n) | seq).toString()
    const author = users[Math.floor(random() * users.length)]!
    const post: Record<string, unknown> = {
      id,
      text: `post ${i} in a thread about #topic${i % 7} with @${users[i % users.length]!.username}`,
      author_id: author.id,
      created_at: formatPostTime(snowflakeTime(id)!),
      lang: i % 5 === 0 ? 'es' : 'en',
      edit_history_tweet_ids: [id],
      public_metrics: {
        retweet_count: i % 3,
        reply_count: i % 4,
        like_count: i % 11,
        quote_count: 0,
        bookmark_count: 0,
        impression_count: i * 10,
      },
    }
    const includes: { users: unknown[]; tweets?: unknown[] } = { users: [author] }
    if (i === 0) {
      rootId = id
      post.conversation_id = id
    } else {
      post.conversation_id = rootId
      const window = Math.min(posts.length, 8)
      const parent = posts[posts.length - 1 - Math.floor(random() * random() * window)]!
      post.in_reply_to_user_id = parent.author.id
      post.referenced_tweets = [{ type: 'replied_to', id: parent.id }]
      includes.users.push(parent.author)
      if (random() < 0.1 && posts.length > 2) {
        const quoted = posts[Math.floor(random() * posts.length)]!
        ;(post.referenced_tweets as unknown[]).push({ type: 'quoted', id: quoted.id })
      }
    }
    if (options.padding) {
      post.entities = {
        hashtags: [{ start: 28, end: 35, tag: `topic${i % 7}` }],
        mentions: [
          {
            start: 41,
            end: 48,
            username: users[i % users.length]!.username,
            id: users[i % users.length]!.id,
          },
        ],
        annotations: [
          { start: 0, end: 3, probability: 0.5, type: 'Other', normalized_text: 'post' },
        ],
      }
      post.context_annotations = [
        {
          domain: { id: '123', name: 'Brand', description: 'Brands and companies' },
          entity: { id: '10026820777', name: 'Threadline' },
        },
      ]
      post.reply_settings = 'everyone'
      post.possibly_sensitive = false
      post.source = 'Threadline Bench'
    }
    posts.push({ id, author })
    lines.push(JSON.stringify({ data: post, includes, matching_rules: [{ id: '1', tag: '' }] }))
  }
  return { rootId, lines, ids: posts.map((p) => p.id) }
}
