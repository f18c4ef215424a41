import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { quotesPage, storeBatch } from '@threadline/db'
import { normalizeLines, type WirePost } from '@threadline/domain'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { compileMatcher } from './matcher.js'
import { parseQuery } from './parse.js'
import { compileSql } from './sql.js'

/**
 * `GET /2/tweets/:id/quote_tweets` (db's quotesPage) and the operator `quotes_of_tweet_id:` mean
 * the same Posts: for every Post of a generated store, the page walk, the operator's SQL and its
 * matcher agree.
 */
let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const TARGETS = ['501', '502', '503', '504']

const refsArb = fc.uniqueArray(
  fc.record({
    type: fc.constantFrom('replied_to', 'quoted', 'retweeted') as fc.Arbitrary<
      'replied_to' | 'quoted' | 'retweeted'
    >,
    id: fc.constantFrom(...TARGETS),
  }),
  { maxLength: 3, selector: (r) => `${r.type}:${r.id}` },
)

async function walkQuotes(id: string, from: string, to: string): Promise<string[]> {
  const ids: string[] = []
  let beforeId: string | undefined
  for (;;) {
    const { posts, more } = await quotesPage(env.db, id, {
      beforeId: beforeId ?? String(BigInt(to) + 1n),
      sinceId: String(BigInt(from) - 1n),
      limit: 3,
    })
    ids.push(...posts.map((p) => p.id))
    if (!more) return ids
    beforeId = posts.at(-1)!.id
  }
}

describe('quote_tweets agrees with quotes_of_tweet_id:', () => {
  it('for every Post, over generated stores', async () => {
    let base = 10_000
    await fc.assert(
      fc.asyncProperty(fc.array(refsArb, { minLength: 1, maxLength: 25 }), async (refsList) => {
        base += 1_000
        const posts: WirePost[] = refsList.map((refs, i) => ({
          id: String(base + i),
          text: `post ${i}`,
          created_at: '2026-11-20T10:00:00.000Z',
          ...(refs.length > 0 ? { referenced_tweets: refs } : {}),
        }))
        const batch = normalizeLines([JSON.stringify({ data: posts })], new Date().toISOString())
        expect(batch.rejects).toEqual([])
        await storeBatch(env.db, batch, 'test')
        const from = String(base)
        const to = String(base + posts.length - 1)
        for (const target of TARGETS) {
          const parsed = parseQuery(`quotes_of_tweet_id:${target}`)
          if (!parsed.ok) throw new Error(parsed.errors.join(', '))
          const rows = await env.db
            .selectFrom('posts')
            .select('posts.id')
            .where('posts.id', '>=', from)
            .where('posts.id', '<=', to)
            .where(compileSql(parsed.ast))
            .orderBy('posts.id', 'desc')
            .execute()
          const bySql = rows.map((r) => r.id)
          const match = compileMatcher(parsed.ast)
          const byMatcher = posts
            .filter((p) => match(p))
            .map((p) => p.id)
            .reverse()
          const byRoute = await walkQuotes(target, from, to)
          expect(byRoute).toEqual(bySql)
          expect(byRoute).toEqual(byMatcher)
        }
      }),
      { numRuns: 40 },
    )
  })
})
