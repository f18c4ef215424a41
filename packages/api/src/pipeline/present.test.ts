import { describe, expect, it } from 'vitest'
import { selection, shapePost, type StoredPost, type StoredUser } from '@threadline/domain'
import type { Hydration } from './hydrate.js'
import { pageJson, present, presentEach, streamLine } from './present.js'
import { applyRules } from './rules.js'

const post = (id: string, extra: Partial<StoredPost> = {}, raw = {}): StoredPost => ({
  id,
  text: `text ${id}`,
  created_at: new Date('2026-11-20T10:00:00Z'),
  conversation_id: '1',
  author_id: '10',
  in_reply_to_user_id: null,
  raw: { id, text: `text ${id}`, author_id: '10', ...raw },
  ...extra,
})
const user: StoredUser = {
  id: '10',
  name: 'Ten',
  username: 'ten',
  raw: { id: '10', name: 'Ten', username: 'ten' },
}

const held = (...posts: StoredPost[]): Hydration => ({
  posts: posts.map((p) => ({ id: p.id, post: p })),
  missing: [],
  targets: { posts: new Map(), users: new Map([[user.id, user]]), usersByName: new Map() },
})

describe('present', () => {
  it('shapes stored Posts as shapePost does and passes Postgres text through as it is', () => {
    const sel = selection(['created_at'])
    const stored = present(applyRules(held(post('5')), 'list'), sel)
    expect(stored.data).toEqual([JSON.stringify(shapePost(post('5'), new Set(['created_at'])))])
    const text = '{"id":"6","text":"t","created_at":"2026-11-20T10:00:00.000Z"}'
    const fromSql = present(
      applyRules({ posts: [{ id: '6', json: text }], missing: [] }, 'list'),
      sel,
    )
    expect(fromSql).toEqual({ data: [text], errors: [] })
  })

  it('appends the thread to Posts of both kinds, last', () => {
    const thread = (id: string) => ({ depth: Number(id) })
    const h: Hydration = {
      posts: [
        { id: '2', json: '{"id":"2","text":"b"}' },
        { id: '3', post: post('3') },
      ],
      missing: [],
    }
    const page = present(applyRules(h, 'tree'), selection(), { thread })
    expect(page.data).toEqual([
      '{"id":"2","text":"b","thread":{"depth":2}}',
      '{"id":"3","text":"text 3","thread":{"depth":3}}',
    ])
  })

  it('names unknown ids first, then the expansions’ missing targets', () => {
    const h = { ...held(post('5', {}, { referenced_tweets: [{ type: 'quoted', id: '9' }] })) }
    h.missing = ['7']
    const page = present(
      applyRules(h, 'lookup'),
      selection([], ['author_id', 'referenced_tweets.id']),
      {
        notFoundAs: 'ids',
      },
    )
    expect(page.errors.map((e) => [e.parameter, e.value])).toEqual([
      ['ids', '7'],
      ['referenced_tweets.id', '9'],
    ])
    expect(page.includes).toEqual({ users: [{ id: '10', name: 'Ten', username: 'ten' }] })
  })
})

describe('a withdrawn Post', () => {
  const h = () => held(post('4'), post('5', { withdrawn: 'deleted' }))

  it('is a placeholder with its thread in the tree', () => {
    const page = present(applyRules(h(), 'tree'), selection(['lang']), {
      thread: () => ({ depth: 1 }),
    })
    expect(page.data[1]).toBe('{"id":"5","thread":{"depth":1,"withdrawn":"deleted"}}')
  })

  it('is named as not found by a lookup, left out of lists and streams', () => {
    const lookup = present(applyRules(h(), 'lookup'), selection(), { notFoundAs: 'ids' })
    expect(lookup.data.map((d) => JSON.parse(d).id)).toEqual(['4'])
    expect(lookup.errors.map((e) => e.value)).toEqual(['5'])
    expect(present(applyRules(h(), 'list'), selection()).data).toHaveLength(1)
    expect([...presentEach(applyRules(h(), 'list'), selection()).keys()]).toEqual(['4'])
  })

  it('is not included: an expansion pointing at it finds nothing', () => {
    const quoting = held(post('6', {}, { referenced_tweets: [{ type: 'quoted', id: '5' }] }))
    quoting.targets = {
      ...quoting.targets!,
      posts: new Map([['5', post('5', { withdrawn: 'unavailable' })]]),
    }
    const page = present(applyRules(quoting, 'list'), selection([], ['referenced_tweets.id']))
    expect(page.includes).toBeUndefined()
    expect(page.errors.map((e) => e.value)).toEqual(['5'])
  })
})

describe('response text', () => {
  it('leaves out empty members and writes a stream line with its rules', () => {
    expect(pageJson({ data: [], errors: [] }, { meta: { result_count: 0 } })).toBe(
      '{"meta":{"result_count":0}}',
    )
    const message = pageJson({ data: ['{"id":"1","text":"a"}'], errors: [] }, { one: true })
    expect(message).toBe('{"data":{"id":"1","text":"a"}}')
    expect(streamLine(message, '[{"id":"9","tag":""}]')).toBe(
      '{"data":{"id":"1","text":"a"},"matching_rules":[{"id":"9","tag":""}]}',
    )
    expect(streamLine(message, '')).toBe(message)
  })
})
