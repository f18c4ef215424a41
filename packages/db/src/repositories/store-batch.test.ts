import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { normalizeLines } from '@threadline/domain'
import { postsParam, usersParam, WireBytes } from './store-batch.js'

/** A jsonb parameter in binary form: version 1, then the text. */
function jsonbText(param: Buffer): string {
  expect(param[0]).toBe(1)
  return param.subarray(1).toString('utf8')
}

const T = '2026-11-21T00:00:00.000Z'

describe('storeBatch parameters', () => {
  it("carry each row's raw object and what raw does not hold, whatever the text", () => {
    fc.assert(
      fc.property(
        fc.string({ unit: 'binary' }),
        fc.string({ unit: 'binary' }),
        fc.option(fc.string({ maxLength: 5 })),
        fc.option(fc.nat()),
        (text, name, lang, likes) => {
          const line = JSON.stringify({
            data: {
              id: '20',
              text,
              created_at: '2026-11-20T10:00:00.000Z',
              author_id: '7',
              conversation_id: '10',
              ...(lang === null ? {} : { lang }),
              ...(likes === null ? {} : { public_metrics: { like_count: likes } }),
              referenced_tweets: [{ type: 'replied_to', id: '10' }],
            },
            includes: {
              users: [{ id: '7', name, username: 'u' }],
              tweets: [{ id: '10', text: 'parent', created_at: '2026-11-20T09:00:00.000Z' }],
            },
          })
          const batch = normalizeLines([line], T)
          const plain = <T>(v: T): T => JSON.parse(JSON.stringify(v)) as T
          expect(JSON.parse(jsonbText(postsParam(batch.posts)))).toEqual(
            batch.posts.map((p) => ({
              r: plain(p.raw),
              t: p.search_terms,
              c: p.created_at,
              ...(p.in_reply_to_post_id === null ? {} : { p: p.in_reply_to_post_id }),
              o: p.observed_at,
              i: p.included,
            })),
          )
          expect(JSON.parse(jsonbText(usersParam(batch.users)))).toEqual(
            batch.users.map((u) => ({ r: plain(u.raw), o: u.observed_at })),
          )
        },
      ),
    )
  })

  it('are built from the bytes WireBytes made once for each raw object', () => {
    const [post] = normalizeLines(
      [JSON.stringify({ data: { id: '1', text: 'x é', created_at: T } })],
      T,
    ).posts
    const bytes = new WireBytes()
    const raw = bytes.of(post!.raw)
    expect(bytes.of(post!.raw)).toBe(raw)
    expect(raw.toString('utf8')).toBe(JSON.stringify(post!.raw))
    expect(postsParam([post!], bytes).includes(Buffer.concat([Buffer.from('{"r":'), raw]))).toBe(
      true,
    )
  })
})
