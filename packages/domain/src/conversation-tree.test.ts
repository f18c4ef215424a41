import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import {
  buildConversationTree,
  CONVERSATION_SORTS,
  walkConversationTree,
  type ConversationSort,
  type ThreadMember,
} from './conversation-tree.js'
import { compareIds } from './ids.js'
import type { SkeletonRows } from './conversation-skeleton.js'
import { HEAVY_TEST_MS, testSize } from '@threadline/testing'

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

/** The property test's size: well under a second on a loaded 2-core box; `pnpm test:large` for a long run. */
const PROPERTY_RUNS = testSize(100, 2_000)
const PROPERTY_MAX_POSTS = testSize(60, 3_000)
/** The time the size may take, with room for a loaded machine. */
const PROPERTY_BUDGET_MS = HEAVY_TEST_MS

type Row = { id: string; parent: string | null; author: string | null; ms: number; likes: number }

/** A conversation's Posts without reply cycles, in random order: orphans, ties, withdrawn authors. */
const skeletons = fc
  .record({
    seed: fc.integer({ min: 1, max: 2 ** 30 }),
    size: fc.integer({ min: 0, max: PROPERTY_MAX_POSTS }),
    rootStored: fc.boolean(),
  })
  .map(({ seed, size, rootStored }) => {
    let s = seed
    const random = () => ((s = (s * 16807) % 2147483647) - 1) / 2147483646
    const rows: Row[] = []
    for (let i = 0; i < size; i++) {
      const id = String(101 + i)
      const roll = random()
      const parent =
        roll < 0.1
          ? `9${i}`
          : roll < 0.2 || rows.length === 0
            ? '100'
            : rows[Math.floor(random() * rows.length)]!.id
      rows.push({
        id,
        parent,
        // A Post whose content is withdrawn keeps its place and has no author.
        author: random() < 0.05 ? null : `u${Math.floor(random() * 6)}`,
        ms: 1000 + i - Math.floor(random() * 3),
        likes: Math.floor(random() * 4),
      })
    }
    if (rootStored) rows.push({ id: '100', parent: null, author: 'u0', ms: 900, likes: 2 })
    for (let i = rows.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1))
      ;[rows[i], rows[j]] = [rows[j]!, rows[i]!]
    }
    return rows
  })

/** The tree of `rows` by recursion over sorted children lists: what the builder must equal. */
function referenceTree(rows: readonly Row[], sort: ConversationSort) {
  const byId = new Map(rows.map((r) => [r.id, r]))
  const oldest = (a: Row, b: Row) => a.ms - b.ms || compareIds(a.id, b.id)
  const order =
    sort === 'oldest'
      ? oldest
      : sort === 'newest'
        ? (a: Row, b: Row) => oldest(b, a)
        : (a: Row, b: Row) => b.likes - a.likes || oldest(a, b)
  const kids = new Map<string, Row[]>()
  const tops: Row[] = []
  for (const r of rows) {
    if (r.id === '100') continue
    if (r.parent !== null && byId.has(r.parent))
      kids.set(r.parent, [...(kids.get(r.parent) ?? []), r])
    else tops.push(r)
  }
  const posts: Array<{ id: string; thread: ThreadMember }> = []
  const visit = (r: Row, depth: number): number => {
    const thread: ThreadMember = { depth, reply_count: 0, descendant_count: 0 }
    if (r.id !== '100' && r.parent !== null) thread.parent_id = r.parent
    if (r.id !== '100' && !byId.has(r.parent ?? '')) thread.missing_parent = true
    posts.push({ id: r.id, thread })
    const children = [...(kids.get(r.id) ?? [])].sort(order)
    thread.reply_count = children.length
    for (const c of children) thread.descendant_count += 1 + visit(c, depth + 1)
    return thread.descendant_count
  }
  const root = byId.get('100')
  if (root) visit(root, 0)
  for (const r of tops.sort(order)) visit(r, 1)
  return posts
}

describe('buildConversationTree over random skeletons', () => {
  it(
    'equals the recursive tree in every sort, whatever the order of the rows',
    () => {
      fc.assert(
        fc.property(skeletons, (posts) => {
          const asRows: SkeletonRows = {
            ids: posts.map((p) => p.id),
            parents: posts.map((p) => p.parent),
            authors: posts.map((p) => p.author),
            createdMs: posts.map((p) => p.ms),
            likes: posts.map((p) => p.likes),
          }
          for (const sort of CONVERSATION_SORTS) {
            const tree = buildConversationTree('100', asRows, sort)
            expect([...walkConversationTree(tree)]).toEqual(referenceTree(posts, sort))
            for (let p = 0; p < tree.size; p++) expect(tree.positionOf(tree.idAt(p))).toBe(p)
            expect(tree.meta.participant_count).toBe(
              new Set(posts.flatMap((p) => (p.author === null ? [] : [p.author]))).size,
            )
          }
        }),
        { numRuns: PROPERTY_RUNS },
      )
    },
    PROPERTY_BUDGET_MS,
  )
})
