import { describe, expect, it } from 'vitest'
import { buildConversationTree, walkConversationTree } from './conversation-tree.js'
import type { SkeletonRows } from './conversation-skeleton.js'

/** Rows from [id, parent, ms, likes] tuples; authors a, b, a, b, … */
function rows(posts: Array<[string, string | null, number, number?]>): SkeletonRows {
  return {
    ids: posts.map((p) => p[0]),
    parents: posts.map((p) => p[1]),
    authors: posts.map((_, i) => (i % 2 === 0 ? 'a' : 'b')),
    createdMs: posts.map((p) => p[2]),
    likes: posts.map((p) => p[3] ?? 0),
  }
}

const shape = (tree: ReturnType<typeof buildConversationTree>) =>
  [...walkConversationTree(tree)].map(({ id, thread }) => `${'  '.repeat(thread.depth)}${id}`)

describe('buildConversationTree', () => {
  const posts = rows([
    ['1', null, 0, 1],
    ['2', '1', 10, 5],
    ['3', '1', 20, 9],
    ['4', '2', 30],
    ['5', '9', 5], // orphan: 9 is not stored
    ['6', '5', 40],
    ['10', '1', 20, 9], // same time and likes as 3: the id decides
  ])

  it('walks pre-order in each sort, orphans after the root subtree', () => {
    expect(shape(buildConversationTree('1', posts, 'oldest'))).toEqual([
      '1',
      '  2',
      '    4',
      '  3',
      '  10',
      '  5',
      '    6',
    ])
    expect(shape(buildConversationTree('1', posts, 'newest'))).toEqual([
      '1',
      '  10',
      '  3',
      '  2',
      '    4',
      '  5',
      '    6',
    ])
    expect(shape(buildConversationTree('1', posts, 'top'))).toEqual([
      '1',
      '  3',
      '  10',
      '  2',
      '    4',
      '  5',
      '    6',
    ])
  })

  it('counts real replies only and marks orphans', () => {
    const tree = buildConversationTree('1', posts, 'oldest')
    expect(tree.threadAt(0)).toEqual({ depth: 0, reply_count: 3, descendant_count: 4 })
    const orphan = tree.positionOf('5')!
    expect(tree.threadAt(orphan)).toEqual({
      depth: 1,
      parent_id: '9',
      reply_count: 1,
      descendant_count: 1,
      missing_parent: true,
    })
    expect(tree.missingParentAt(orphan)).toBe('9')
    expect(tree.meta).toEqual({
      post_count: 7,
      reply_count: 6,
      missing_count: 1,
      max_depth: 2,
      participant_count: 2,
      first_created_at: new Date(0).toISOString(),
      last_created_at: new Date(40).toISOString(),
    })
  })

  it('starts with the orphans when the root is not stored', () => {
    const tree = buildConversationTree(
      '1',
      rows([
        ['2', '1', 1],
        ['3', '2', 2],
        ['4', '1', 3],
      ]),
    )
    expect(tree.rootStored).toBe(false)
    expect(shape(tree)).toEqual(['  2', '    3', '  4'])
    expect(tree.meta.missing_count).toBe(1)
  })

  it('keeps every Post of a reply cycle once, under the root, and any depth', () => {
    const cyclic = rows([
      ['1', null, 0],
      ['2', '3', 1],
      ['3', '2', 2],
      ['4', '3', 3],
      ['5', '5', 4],
    ])
    const tree = buildConversationTree('1', cyclic)
    expect(shape(tree)).toEqual(['1', '  2', '    3', '      4', '  5'])
    expect(tree.threadAt(1).missing_parent).toBeUndefined()

    const n = 200_000
    const chain = rows(
      Array.from({ length: n }, (_, i) => [String(i + 1), i === 0 ? null : String(i), i]),
    )
    const deep = buildConversationTree('1', chain)
    expect(deep.meta.max_depth).toBe(n - 1)
    expect(deep.threadAt(0).descendant_count).toBe(n - 1)
  })

  it('orders rows given in time order as it orders them shuffled', () => {
    let seed = 7
    const random = () => ((seed = (seed * 16807) % 2147483647) - 1) / 2147483646
    const posts: Array<[string, string | null, number, number]> = [['100', null, 0, 3]]
    for (let i = 1; i < 3000; i++) {
      const parent = posts[Math.floor(random() * posts.length)]![0]
      // Some siblings share a millisecond; likes are few, so `top` has ties.
      posts.push([String(100 + i), parent, i - (i % 3), Math.floor(random() * 4)])
    }
    const shuffled = [...posts].sort(() => random() - 0.5)
    for (const sort of ['oldest', 'newest', 'top'] as const) {
      const inOrder = buildConversationTree('100', rows(posts), sort)
      const mixed = buildConversationTree('100', rows(shuffled), sort)
      expect([...walkConversationTree(inOrder)]).toEqual([...walkConversationTree(mixed)])
    }
  })
})
