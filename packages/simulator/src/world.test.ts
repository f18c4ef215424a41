import { describe, expect, it } from 'vitest'
import { compareIds, snowflakeTime } from '@threadline/domain'
import { compileConversationRule, RuleStore } from './rules.js'
import { createWorld, type SimPost } from './world.js'

const NOW = Date.parse('2026-11-20T12:00:00.000Z')
const DAY = 86_400_000

const all = (w: ReturnType<typeof createWorld>): SimPost[] => [...w.newestFirst()].reverse()

// Whole-world checks walk every generated Post: a loaded machine takes seconds over them.
describe('world generator', { timeout: 30_000 }, () => {
  const world = createWorld({ seed: 7, now: NOW })
  const posts = all(world)

  it('is deterministic for a seed and a start time', () => {
    const again = createWorld({ seed: 7, now: NOW })
    expect(all(again).map((p) => again.json(p))).toEqual(posts.map((p) => world.json(p)))
    const a = createWorld({ seed: 7, now: NOW, historyPosts: 500 }).generate(200, NOW + 1000)
    const b = createWorld({ seed: 7, now: NOW, historyPosts: 500 }).generate(200, NOW + 1000)
    expect(a.map((p) => p.wire)).toEqual(b.map((p) => p.wire))
    const other = createWorld({ seed: 8, now: NOW, historyPosts: 500 }).generate(200, NOW + 1000)
    expect(other.map((p) => p.wire.text)).not.toEqual(a.map((p) => p.wire.text))
  })

  it('makes ids that increase with time and encode created_at', () => {
    for (let i = 1; i < posts.length; i++) {
      expect(compareIds(posts[i - 1]!.id, posts[i]!.id)).toBe(-1)
    }
    for (const p of posts) {
      expect(snowflakeTime(p.id)!.toISOString()).toBe(p.wire.created_at)
    }
    const live = world.generate(5000, NOW + 60_000)
    for (const p of live) expect(compareIds(posts[posts.length - 1]!.id, p.id)).toBe(-1)
  })

  it('gives every reply the conversation_id of its root, and the fields X gives', () => {
    let replies = 0
    for (const p of posts) {
      const w = p.wire
      expect(w.edit_history_tweet_ids).toEqual([p.id])
      expect(typeof w.lang).toBe('string')
      if (p.kind === 'reply') {
        replies++
        const parent = world.get(p.parentId!)!
        expect(w.conversation_id).toBe(parent.wire.conversation_id)
        expect(w.in_reply_to_user_id).toBe(parent.authorId)
        expect(w.referenced_tweets![0]).toEqual({ type: 'replied_to', id: parent.id })
        let root = p
        while (root.parentId) root = world.get(root.parentId)!
        expect(root.kind === 'root' || root.kind === 'quote').toBe(true)
        expect(w.conversation_id).toBe(root.id)
      } else {
        expect(w.conversation_id).toBe(p.id)
        expect(w.in_reply_to_user_id).toBeUndefined()
      }
      for (const m of (
        w.entities as { mentions?: { start: number; end: number; username: string }[] }
      )?.mentions ?? []) {
        expect(w.text.slice(m.start, m.end)).toBe(`@${m.username}`)
      }
    }
    expect(replies).toBeGreaterThan(posts.length / 2)
    expect(posts.some((p) => p.kind === 'retweet')).toBe(true)
    // Quotes across conversations: a reply or root that quotes a Post of another conversation.
    expect(
      posts.some((p) => p.quotedId && world.get(p.quotedId)?.conversationId !== p.conversationId),
    ).toBe(true)
    expect(Math.max(...posts.map((p) => p.depth))).toBeGreaterThanOrEqual(5)
  })

  it('has heavy-tailed conversation sizes', () => {
    const sizes = new Map<string, number>()
    for (const p of posts) {
      if (p.kind !== 'retweet') sizes.set(p.conversationId, (sizes.get(p.conversationId) ?? 0) + 1)
    }
    const sorted = [...sizes.values()].sort((a, b) => a - b)
    const median = sorted[sorted.length >> 1]!
    expect(median).toBeLessThanOrEqual(2)
    expect(sorted[sorted.length - 1]).toBeGreaterThanOrEqual(1000)
    expect(sorted.filter((s) => s >= 100).length).toBeGreaterThanOrEqual(3)
  })

  it('has conversations whose roots are older than 7 days but that go on within them', () => {
    const old = world.demoConversations().find((id) => world.get(id)!.createdMs < NOW - 7 * DAY)
    expect(old).toBeDefined()
    const conv = world.conversation(old!)!
    expect(conv.some((p) => p.createdMs >= NOW - 7 * DAY)).toBe(true)
    expect(world.demoConversations().length).toBe(3)
  })

  it('forgets the oldest Posts past maxPosts', () => {
    const small = createWorld({ seed: 1, now: NOW, historyPosts: 2000, maxPosts: 1000 })
    expect(small.size).toBe(1000)
    small.generate(500, NOW + 1)
    expect(small.size).toBe(1000)
    const oldest = [...small.newestFirst()].pop()!
    expect(small.conversation(oldest.conversationId)![0]!.createdMs).toBeGreaterThanOrEqual(
      oldest.createdMs,
    )
  })
})

describe('conversation rules (until the query package is ready)', () => {
  it('accepts conversation_id rules and ORs of them, and refuses others with a reason', () => {
    expect(compileConversationRule('conversation_id:123')).toEqual({
      ok: true,
      rule: { conversationIds: ['123'] },
    })
    expect(compileConversationRule('conversation_id:1 OR conversation_id:2')).toMatchObject({
      ok: true,
      rule: { conversationIds: ['1', '2'] },
    })
    expect(compileConversationRule('foo:bar')).toMatchObject({ ok: false })
    expect(compileConversationRule('conversation_id:abc')).toMatchObject({ ok: false })
  })

  it('matches Posts by hash lookup and reports duplicates', () => {
    const store = new RuleStore()
    const { created } = store.add([{ value: 'conversation_id:5', tag: 't' }], false)
    expect(store.add([{ value: 'conversation_id:5' }], false).errors[0]).toMatchObject({
      title: 'DuplicateRule',
      id: created[0]!.id,
    })
    expect(store.match({ id: '9', text: '', conversation_id: '5' })).toHaveLength(1)
    expect(store.match({ id: '9', text: '', conversation_id: '6' })).toHaveLength(0)
    store.delete(['conversation_id:5'], 'values', false)
    expect(store.match({ id: '9', text: '', conversation_id: '5' })).toHaveLength(0)
  })
})
