import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { normalizeLines } from '@threadline/domain'
import { postsParams, usersParams } from './store-batch.js'

const T = '2026-11-21T00:00:00.000Z'

describe('storeBatch parameters', () => {
  // A hundred generated batches: slow on a loaded machine, hence the longer timeout.
  it(
    "carry each row's raw object and what raw does not hold, whatever the text",
    { timeout: 60_000 },
    () => {
      fc.assert(
        fc.property(
          fc.string({ unit: 'binary' }),
          fc.string({ unit: 'binary' }),
          fc.option(fc.string({ maxLength: 5 })),
          fc.option(fc.nat()),
          fc.boolean(),
          (text, name, lang, likes, quoted) => {
            const line = JSON.stringify({
              data: {
                id: '20',
                text,
                created_at: '2026-11-20T10:00:00.000Z',
                author_id: '7',
                conversation_id: '10',
                ...(lang === null ? {} : { lang }),
                ...(likes === null ? {} : { public_metrics: { like_count: likes } }),
                referenced_tweets: [
                  { type: 'replied_to', id: '10' },
                  ...(quoted ? [{ type: 'quoted', id: '11' }] : []),
                ],
              },
              includes: {
                users: [{ id: '7', name, username: 'u' }],
                tweets: [{ id: '10', text: 'parent', created_at: '2026-11-20T09:00:00.000Z' }],
              },
            })
            const batch = normalizeLines([line], T)
            const plain = <V>(v: V): V => JSON.parse(JSON.stringify(v)) as V
            const posts = postsParams(batch.posts)
            // Row i of each parameter is row i of the batch.
            expect(JSON.parse(posts.raw)).toEqual(batch.posts.map((p) => plain(p.raw)))
            expect(JSON.parse(posts.derived)).toEqual(
              batch.posts.map((p) => ({
                search_terms: p.search_terms,
                created_at: p.created_at,
                in_reply_to_post_id: p.in_reply_to_post_id,
                ...(quoted && p.id === '20' ? { quotes: [{ type: 'quoted', id: '11' }] } : {}),
                observed_at: p.observed_at,
                included: p.included,
              })),
            )
            const users = usersParams(batch.users)
            expect(JSON.parse(users.raw)).toEqual(batch.users.map((u) => plain(u.raw)))
            expect(users.observed_at).toEqual(batch.users.map((u) => u.observed_at))
          },
        ),
      )
    },
  )
})
