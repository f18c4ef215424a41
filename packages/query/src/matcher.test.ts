import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import type { WirePost } from '@threadline/domain'
import { CASES, CORPUS, INCLUDES, USERS, postArb, queryArb } from '@threadline/testing/query'
import { compileMatcher } from './matcher.js'
import { parseQuery } from './parse.js'
import { RuleIndex } from './rule-index.js'
import type { Ast } from './ast.js'

const parse = (q: string): Ast => {
  const r = parseQuery(q)
  if (!r.ok) throw new Error(`${q}: ${r.errors.join(', ')}`)
  return r.ast
}

describe('compileMatcher: every operator over the fixed corpus', () => {
  it.each(CASES)('%s', (q, expected) => {
    const match = compileMatcher(parse(q))
    expect(CORPUS.filter((p) => match(p, INCLUDES)).map((p) => p.id)).toEqual(expected)
  })

  it('reads usernames from includes, else from an inlined author with the same id', () => {
    const match = compileMatcher(parse('from:alice'))
    const post: WirePost = { id: '1', text: 'x', author_id: '11' }
    expect(match(post)).toBe(false)
    expect(match(post, INCLUDES)).toBe(true)
    expect(match({ ...post, author: USERS[0] })).toBe(true)
    expect(match({ ...post, author: { ...USERS[0], id: '99' } })).toBe(false)
  })
})

/** Distinct random queries the parser accepts, as rules. */
const rulesArb = fc
  .uniqueArray(queryArb, { minLength: 1, maxLength: 40 })
  .map((qs) => qs.map((q) => ({ q, r: parseQuery(q) })).filter((x) => x.r.ok))

const postsArb = fc
  .array(postArb, { minLength: 1, maxLength: 20 })
  .map((ps) => ps.map((p, i) => ({ ...p, id: String(1000 + i) }) as WirePost))

describe('RuleIndex', () => {
  it('returns exactly the rules whose predicate is true', () => {
    fc.assert(
      fc.property(
        rulesArb,
        postsArb,
        fc.array(fc.nat(), { maxLength: 5 }),
        (rules, posts, drop) => {
          const index = new RuleIndex<string>()
          const live = new Map<string, (p: WirePost, i?: typeof INCLUDES) => boolean>()
          rules.forEach(({ r }, i) => {
            if (!r.ok) return
            index.add(`r${i}`, r.ast, `r${i}`)
            live.set(`r${i}`, compileMatcher(r.ast))
          })
          // Removal keeps the index exact.
          for (const n of drop) {
            const id = `r${n % Math.max(1, rules.length)}`
            index.remove(id)
            live.delete(id)
          }
          expect(index.size).toBe(live.size)
          for (const post of posts) {
            const expected = [...live].filter(([, m]) => m(post, INCLUDES)).map(([id]) => id)
            expect(index.match(post, INCLUDES).sort()).toEqual(expected.sort())
          }
        },
      ),
      { numRuns: 300 },
    )
  })

  it('re-adding an id replaces the rule', () => {
    const index = new RuleIndex<number>()
    index.add('a', parse('conversation_id:5'), 1)
    index.add('a', parse('cat'), 2)
    expect(index.size).toBe(1)
    expect(index.match({ id: '9', text: 'x', conversation_id: '5' })).toEqual([])
    expect(index.match({ id: '9', text: 'a cat' })).toEqual([2])
    index.remove('a')
    index.remove('a')
    expect(index.size).toBe(0)
    expect(index.match({ id: '9', text: 'a cat' })).toEqual([])
  })
})
