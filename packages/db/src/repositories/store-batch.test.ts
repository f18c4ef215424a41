import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { BatchNormalizer, normalizeLines, type PostRow } from '@threadline/domain'
import { arrayLiteral, postsParams, textArray, usersParams, WireBytes } from './store-batch.js'

/** A jsonb parameter in binary form: version 1, then the text. */
function jsonbText(param: Buffer): string {
  expect(param[0]).toBe(1)
  return param.subarray(1).toString('utf8')
}

/** Reads a one-dimensional text[] in Postgres's binary array form back into its elements. */
function elements(array: Buffer): string[] {
  expect(array.readInt32BE(0)).toBe(1) // dimensions
  expect(array.readInt32BE(4)).toBe(0) // no NULLs
  expect(array.readUInt32BE(8)).toBe(25) // text
  expect(array.readInt32BE(16)).toBe(1) // lower bound
  const out: string[] = []
  let at = 20
  for (let i = array.readInt32BE(12); i > 0; i--) {
    const length = array.readInt32BE(at)
    out.push(array.toString('utf8', at + 4, at + 4 + length))
    at += 4 + length
  }
  expect(at).toBe(array.length)
  return out
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
          expect(elements(posts.raw).map((r) => JSON.parse(r) as unknown)).toEqual(
            batch.posts.map((p) => plain(p.raw)),
          )
          expect(elements(posts.terms)).toEqual(
            batch.posts.map((p) => arrayLiteral(p.search_terms)),
          )
          expect(JSON.parse(jsonbText(posts.rest))).toEqual(
            batch.posts.map((p) => ({
              c: p.created_at,
              ...(p.in_reply_to_post_id === null ? {} : { p: p.in_reply_to_post_id }),
              ...(quoted && p.id === '20' ? { q: [{ type: 'quoted', id: '11' }] } : {}),
              o: p.observed_at,
              i: p.included,
            })),
          )
          const users = usersParams(batch.users)
          expect(elements(users.raw).map((r) => JSON.parse(r) as unknown)).toEqual(
            batch.users.map((u) => plain(u.raw)),
          )
          expect(elements(users.observed)).toEqual(batch.users.map((u) => u.observed_at))
        },
      ),
    )
  })

  it('hold any text and no row at all as text[] elements', () => {
    fc.assert(
      fc.property(fc.array(fc.string({ unit: 'binary' })), (items) => {
        expect(elements(textArray(items))).toEqual(items)
        expect(elements(textArray(items.map((i) => Buffer.from(i, 'utf8'))))).toEqual(items)
      }),
    )
  })

  it('are built from the bytes WireBytes made once for each raw object', () => {
    const [post] = normalizeLines(
      [JSON.stringify({ data: { id: '1', text: 'x é', created_at: T } })],
      T,
    ).posts
    const bytes = new WireBytes()
    const raw = bytes.of(post!)
    const copy: PostRow = { ...post!, included: true }
    expect(bytes.of(copy)).toBe(raw)
    expect(raw.toString('utf8')).toBe(JSON.stringify(post!.raw))
    expect(postsParams([post!], bytes).raw.includes(raw)).toBe(true)
  })

  it("use a row's raw_json as it is, a view of its line", () => {
    const line = Buffer.from(
      '{"data":{"id":"1","text":"x \\u00e9","created_at":"2026-11-21T00:00:00Z"}}',
    )
    const normalizer = new BatchNormalizer(T)
    normalizer.addLine(line.toString('utf8'), line)
    const [post] = normalizer.result().posts
    const raw = new WireBytes().of(post!)
    expect(raw.buffer).toBe(line.buffer)
    expect(raw.toString('utf8')).toBe(
      '{"id":"1","text":"x \\u00e9","created_at":"2026-11-21T00:00:00Z"}',
    )
    expect(elements(postsParams([post!]).raw)).toEqual([raw.toString('utf8')])
  })
})
