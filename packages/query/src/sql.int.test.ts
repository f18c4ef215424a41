import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { storeBatch } from '@threadline/db'
import { normalizeLines, type WirePost } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import type { Ast } from './ast.js'
import { CASES, CORPUS, INCLUDES, postArb, queryArb } from '@threadline/testing/query'
import { compileMatcher } from './matcher.js'
import { parseQuery } from './parse.js'
import { compileSql } from './sql.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(async () => {
  await env?.close()
})

const parse = (q: string): Ast => {
  const r = parseQuery(q)
  if (!r.ok) throw new Error(`${q}: ${r.errors.join(', ')}`)
  return r.ast
}

/** Stores Posts (and the fixture users) the way the writer does, so search_terms is the writer's. */
async function store(posts: WirePost[]): Promise<void> {
  const line = JSON.stringify({ data: posts, includes: INCLUDES })
  const batch = normalizeLines([line], new Date().toISOString())
  expect(batch.rejects).toEqual([])
  await storeBatch(env.db, batch, 'test')
}

async function sqlIds(ast: Ast, from: string, to: string): Promise<string[]> {
  const rows = await env.db
    .selectFrom('posts')
    .select('posts.id')
    .where('posts.id', '>=', from)
    .where('posts.id', '<=', to)
    .where(compileSql(ast))
    .orderBy('posts.id')
    .execute()
  return rows.map((r) => r.id)
}

describe('compileSql: every operator over the fixed corpus', () => {
  beforeAll(async () => {
    await store(CORPUS)
  })

  it.each(CASES)('%s', async (q, expected) => {
    expect(await sqlIds(parse(q), '101', '199')).toEqual(expected)
  })

  it('works with other tables joined (every column is qualified)', async () => {
    const rows = await env.db
      .selectFrom('posts')
      .innerJoin('users', 'users.id', 'posts.author_id')
      .select(['posts.id', 'users.username'])
      .where(compileSql(parse('from:bob_1 OR from:alice coca')))
      .orderBy('posts.id')
      .execute()
    expect(rows.map((r) => r.id)).toEqual(['101', '102', '104', '108'])
  })

  it('injection: quotes, backslashes, %, _ and unicode are data, never SQL or LIKE syntax', async () => {
    const at = '2026-11-20T10:00:00.000Z'
    const hostile: WirePost[] = [
      { id: '201', text: "x' OR '1'='1", created_at: at },
      { id: '202', text: 'under_score 50%off back\\slash', created_at: at },
      { id: '203', text: 'underXscore 50Xoff backXslash', created_at: at },
      { id: '204', text: 'Ünïcode ＦＵＬＬ ﬁne 🙂 "dq"', created_at: at },
    ]
    await store(hostile)
    const cases: Array<[string, string[]]> = [
      ["\"x' OR '1'='1\"", ['201']],
      ['under_score', ['202']],
      ['"50%off"', ['202']],
      ['back\\slash', ['202']],
      ['"%"', []],
      ['"_"', []],
      ['ünïcode', ['204']],
      ['full fine', ['204']],
      ['"🙂" dq', ['204']],
      ['\\', []],
      ['url:"%_\\\\"', []],
      ['"\\" OR 1=1 --"', []],
    ]
    for (const [q, expected] of cases) {
      const r = parseQuery(q)
      // Queries without a real term are refused before reaching SQL: that is the right answer too.
      if (!r.ok) {
        expect(expected, q).toEqual([])
        continue
      }
      expect(await sqlIds(r.ast, '201', '204'), q).toEqual(expected)
      const match = compileMatcher(r.ast)
      expect(
        hostile.filter((p) => match(p)).map((p) => p.id),
        q,
      ).toEqual(expected)
    }
    const count = await env.db
      .selectFrom('posts')
      .select((eb) => eb.fn.countAll<string>().as('n'))
      .executeTakeFirstOrThrow()
    expect(Number(count.n)).toBe(CORPUS.length + hostile.length)
  })
})

describe('SQL and matcher agree', () => {
  let next = 10_000
  it('on random queries over random Posts', async () => {
    // Queries that split a corpus (some Posts match, some do not): the test must see many.
    let informative = 0
    await fc.assert(
      fc.asyncProperty(
        fc.array(postArb, { minLength: 20, maxLength: 60 }),
        fc.array(queryArb, { minLength: 20, maxLength: 30 }),
        async (drafts, queries) => {
          const first = next
          const posts = drafts.map((p, i) => ({ ...p, id: String(first + i) }) as WirePost)
          next += drafts.length
          await store(posts)
          for (const q of queries) {
            const r = parseQuery(q)
            if (!r.ok) continue
            const match = compileMatcher(r.ast)
            const expected = posts.filter((p) => match(p, INCLUDES)).map((p) => p.id)
            const actual = await sqlIds(r.ast, String(first), String(next - 1))
            expect(actual, q).toEqual(expected)
            if (expected.length > 0 && expected.length < posts.length) informative += 1
          }
        },
      ),
      { numRuns: 25 },
    )
    expect(informative).toBeGreaterThan(100)
  })
})
