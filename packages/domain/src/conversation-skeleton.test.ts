import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { HeldSkeleton, type SkeletonRows } from './conversation-skeleton.js'
import {
  buildConversationTree,
  CONVERSATION_SORTS,
  extendConversationTree,
  walkConversationTree,
  type ConversationTree,
} from './conversation-tree.js'

type Row = { id: string; parent: string | null; author: string; ms: number; likes: number }

const rowsOf = (rows: readonly Row[]): SkeletonRows => ({
  ids: rows.map((r) => r.id),
  parents: rows.map((r) => r.parent),
  authors: rows.map((r) => r.author),
  createdMs: rows.map((r) => r.ms),
  likes: rows.map((r) => r.likes),
})

const walk = (tree: ConversationTree) => ({
  posts: [...walkConversationTree(tree)],
  missing: Array.from({ length: tree.size }, (_, p) => tree.missingParentAt(p)),
  meta: tree.meta,
  rootStored: tree.rootStored,
})

/**
 * A conversation stored in steps: each step a delta of new replies, new orphans, like changes
 * and now and then a Post older than the newest (a backfill) or a parent orphans waited for.
 * Ids grow with time except for those older Posts.
 */
const history = fc
  .record({
    seed: fc.integer({ min: 1, max: 2 ** 30 }),
    steps: fc.integer({ min: 1, max: 12 }),
    first: fc.integer({ min: 0, max: 60 }),
  })
  .map(({ seed, steps, first }) => {
    let s = seed
    const random = () => ((s = (s * 16807) % 2147483647) - 1) / 2147483646
    const pick = <T>(xs: readonly T[]) => xs[Math.floor(random() * xs.length)]!
    let clock = 1000
    let nextId = 100
    const stored: Row[] = []
    const newRow = (parent: string | null, ms = (clock += Math.floor(random() * 3))): Row => ({
      id: String(nextId++),
      parent,
      author: `u${Math.floor(random() * 5)}`,
      ms,
      likes: Math.floor(random() * 4),
    })
    const deltas: Row[][] = []
    const step = (size: number): Row[] => {
      const delta: Row[] = []
      for (let i = 0; i < size; i++) {
        const roll = random()
        if (roll < 0.08 && stored.length > 0) {
          // A like change on a stored Post.
          const r = pick(stored)
          delta.push({ ...r, likes: r.likes + 1 })
        } else if (roll < 0.12) {
          // An orphan: its parent never comes, or comes a few Posts later.
          delta.push(
            newRow(random() < 0.5 ? `9${nextId}` : String(nextId + 1 + Math.floor(random() * 3))),
          )
        } else if (roll < 0.14 && stored.length > 0) {
          delta.push(newRow(pick(stored).id, pick(stored).ms - 1)) // older than the newest
        } else {
          const all = [...stored, ...delta]
          delta.push(newRow(all.length > 0 ? pick(all).id : null))
        }
        const last = delta[delta.length - 1]!
        const at = stored.findIndex((r) => r.id === last.id)
        if (at >= 0) stored[at] = last
        else stored.push(last)
      }
      // A delta holds each Post once, as it is now.
      return [...new Map(delta.map((r) => [r.id, r])).keys()].map((id) =>
        delta.findLast((r) => r.id === id)!,
      )
    }
    // The root is row 100 when the first step has any rows; its parent is null.
    deltas.push(step(first).map((r) => (r.id === '100' ? { ...r, parent: null } : r)))
    if (stored[0]?.id === '100') stored[0] = { ...stored[0], parent: null }
    for (let i = 0; i < steps; i++) deltas.push(step(Math.floor(random() * 6)))
    return deltas
  })

describe('HeldSkeleton and extendConversationTree', () => {
  it('give, after every delta, the tree a whole build gives', () => {
    fc.assert(
      fc.property(history, (deltas) => {
        let skeleton = HeldSkeleton.of(rowsOf(deltas[0]!))
        let trees = CONVERSATION_SORTS.map((sort) => buildConversationTree('100', skeleton, sort))
        const latest = new Map<string, Row>()
        for (const r of deltas[0]!) latest.set(r.id, r)
        for (const delta of deltas.slice(1)) {
          const previous = trees
          const before = previous.map(walk)
          for (const r of delta) latest.set(r.id, r)
          const { skeleton: next, appendedFrom } = skeleton.apply(rowsOf(delta))
          const extended = trees.map((tree) =>
            appendedFrom === undefined
              ? undefined
              : extendConversationTree(tree, next, appendedFrom),
          )
          trees = CONVERSATION_SORTS.map(
            (sort, i) => extended[i] ?? buildConversationTree('100', next, sort),
          )
          const whole = rowsOf([...latest.values()])
          CONVERSATION_SORTS.forEach((sort, i) => {
            expect(walk(trees[i]!)).toEqual(walk(buildConversationTree('100', whole, sort)))
          })
          // The trees of the version before are untouched by the new one.
          expect(previous.map(walk)).toEqual(before)
          skeleton = next
        }
      }),
      { numRuns: 300 },
    )
  })

  it('leaves the trees of the version before as they were', () => {
    const rows: Row[] = [
      { id: '1', parent: null, author: 'a', ms: 0, likes: 0 },
      { id: '2', parent: '1', author: 'b', ms: 1, likes: 0 },
    ]
    const skeleton = HeldSkeleton.of(rowsOf(rows))
    const old = buildConversationTree('1', skeleton, 'oldest')
    const shape = walk(old)
    const { skeleton: next, appendedFrom } = skeleton.apply(
      rowsOf([{ id: '3', parent: '2', author: 'c', ms: 2, likes: 0 }]),
    )
    expect(appendedFrom).toBe(2)
    const extended = extendConversationTree(old, next, appendedFrom!)!
    expect(extended.size).toBe(3)
    expect(extended.positionOf('3')).toBe(2)
    expect(walk(old)).toEqual(shape)
    expect(old.positionOf('3')).toBeUndefined()
    // A tree built for the old version from the grown skeleton holds only the old rows.
    expect(walk(buildConversationTree('1', next, 'oldest', 2))).toEqual(shape)
    // A like change copies the column into a new skeleton; the one before is done with.
    const liked = next.apply(rowsOf([{ id: '2', parent: '1', author: 'b', ms: 1, likes: 5 }]))
    expect(liked.skeleton).not.toBe(next)
    expect(liked.appendedFrom).toBe(3)
    expect(() => next.apply(rowsOf([]))).toThrow(/superseded/)
  })

  it('builds again when a parent that orphans waited for arrives', () => {
    const skeleton = HeldSkeleton.of(
      rowsOf([
        { id: '1', parent: null, author: 'a', ms: 0, likes: 0 },
        { id: '3', parent: '2', author: 'b', ms: 5, likes: 0 },
      ]),
    )
    const tree = buildConversationTree('1', skeleton, 'oldest')
    const { skeleton: next, appendedFrom } = skeleton.apply(
      rowsOf([{ id: '4', parent: '3', author: 'a', ms: 6, likes: 0 }]),
    )
    expect(extendConversationTree(tree, next, appendedFrom!)).toBeDefined()
    // '2' is older than the newest: the skeleton is rebuilt, and no tree is extended.
    const later = next.apply(rowsOf([{ id: '2', parent: '1', author: 'a', ms: 1, likes: 0 }]))
    expect(later.appendedFrom).toBeUndefined()
    expect(
      walk(buildConversationTree('1', later.skeleton, 'oldest')).posts.map((p) => p.id),
    ).toEqual(['1', '2', '3', '4'])
  })
})
