import fc from 'fast-check'
import { describe, expect, it } from 'vitest'
import { compareIds, isId, snowflakeAt, snowflakeTime } from './ids.js'
import { normalizeLines } from './normalize.js'
import { formatPostTime, formatSecondsTime, parseTime, postTime } from './time.js'

const T = '2026-11-21T00:00:00.000Z'
const post = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  text: `post ${id}`,
  created_at: '2026-11-20T10:00:00.000Z',
  ...extra,
})

describe('ids', () => {
  it('accepts 1-19 digits within int64 and nothing else', () => {
    expect(isId('1')).toBe(true)
    expect(isId('9223372036854775807')).toBe(true)
    expect(isId('9223372036854775808')).toBe(false)
    expect(isId('12345678901234567890')).toBe(false)
    expect(isId('')).toBe(false)
    expect(isId('-1')).toBe(false)
    expect(isId(' 1')).toBe(false)
    expect(isId(1 as unknown)).toBe(false)
    expect(isId('0000000000000000001')).toBe(true)
    expect(isId('9999999999999999999')).toBe(false)
  })
  it('agrees with a BigInt bound on every 1-20 digit string', () => {
    const max = 9223372036854775807n
    fc.assert(
      fc.property(fc.stringMatching(/^[0-9]{1,20}$/), (s) => {
        expect(isId(s)).toBe(s.length <= 19 && BigInt(s) <= max)
      }),
      { numRuns: 2000 },
    )
    for (const s of ['9223372036854775806', '9223372036854775807', '9223372036854775808']) {
      expect(isId(s)).toBe(BigInt(s) <= max)
    }
  })
  it('reads the time out of a snowflake and back', () => {
    expect(snowflakeTime('1460323737035677698')?.toISOString()).toBe('2021-11-15T19:08:05.069Z')
    const at = new Date('2026-11-20T10:00:00.000Z')
    expect(snowflakeTime(snowflakeAt(at))?.toISOString()).toBe(at.toISOString())
    expect(snowflakeTime('20')).toBeUndefined()
  })
  it('compares ids numerically, beyond 2^53', () => {
    expect(compareIds('9007199254740993', '9007199254740992')).toBe(1)
    expect(compareIds('99', '100')).toBe(-1)
    expect(compareIds('5', '5')).toBe(0)
  })
})

describe('time formats', () => {
  it('accepts Z and +00:00, with or without fractions', () => {
    expect(parseTime('2026-11-20T10:00:00Z')?.toISOString()).toBe('2026-11-20T10:00:00.000Z')
    expect(parseTime('2026-11-20T10:00:00.5+00:00')?.toISOString()).toBe('2026-11-20T10:00:00.500Z')
    expect(parseTime('2026-11-20T12:00:00+02:00')?.toISOString()).toBe('2026-11-20T10:00:00.000Z')
  })
  it('refuses what is not a time', () => {
    for (const bad of [
      'yesterday',
      '2026-11-20',
      '2026-02-31T00:00:00Z',
      '2026-11-20T25:00:00Z',
      '2026-11-20 10:00:00Z',
      5,
    ]) {
      expect(parseTime(bad)).toBeUndefined()
    }
  })
  it("reads a Post's time as parseTime and formatPostTime do, on X's form and any other", () => {
    const slow = (v: unknown) => {
      const d = parseTime(v)
      return d && formatPostTime(d)
    }
    const pad = (n: number, w: number) => String(n).padStart(w, '0')
    // X's form, with every field in and out of range (Feb 29 of leap and common years, second 60,
    // hour 24, month 13, day 0, years before 1970).
    const xForm = fc
      .tuple(
        fc.integer({ min: 1900, max: 9999 }),
        fc.integer({ min: 0, max: 13 }),
        fc.integer({ min: 0, max: 32 }),
        fc.integer({ min: 0, max: 24 }),
        fc.integer({ min: 0, max: 60 }),
        fc.integer({ min: 0, max: 61 }),
        fc.integer({ min: 0, max: 999 }),
      )
      .map(
        ([y, mo, d, h, mi, s, ms]) =>
          `${pad(y, 4)}-${pad(mo, 2)}-${pad(d, 2)}T${pad(h, 2)}:${pad(mi, 2)}:${pad(s, 2)}.${pad(ms, 3)}Z`,
      )
    const other = fc.oneof(
      fc.string({ maxLength: 30 }),
      xForm.map((v) => v.replace('.', ',')),
      xForm.map((v) => v.replace('Z', '+00:00')),
      xForm.map((v) => v.slice(0, 19) + 'Z'),
      xForm.map((v) => v.replace(/\d/, 'x')),
    )
    fc.assert(
      fc.property(fc.oneof(xForm, other), (v) => {
        expect(postTime(v)).toBe(slow(v))
      }),
      { numRuns: 5000 },
    )
    for (const v of [
      '2024-02-29T00:00:00.000Z',
      '2023-02-29T00:00:00.000Z',
      '2000-02-29T23:59:59.999Z',
      '1900-02-29T00:00:00.000Z',
      '2026-11-20T10:00:60.000Z',
      5,
    ]) {
      expect(postTime(v)).toBe(slow(v))
    }
  })
  it('formats Post times with milliseconds and others without', () => {
    const d = new Date('2026-11-20T16:35:08.000Z')
    expect(formatPostTime(d)).toBe('2026-11-20T16:35:08.000Z')
    expect(formatSecondsTime(d)).toBe('2026-11-20T16:35:08Z')
  })
})

describe('normalizeLines', () => {
  it('reads a filtered-stream line with its includes', () => {
    const line = JSON.stringify({
      data: post('20', {
        author_id: '7',
        conversation_id: '10',
        in_reply_to_user_id: '8',
        referenced_tweets: [
          { type: 'replied_to', id: '10' },
          { type: 'quoted', id: '11' },
        ],
      }),
      includes: {
        users: [{ id: '7', name: 'A', username: 'a' }],
        tweets: [post('10'), post('11')],
      },
      matching_rules: [{ id: '1', tag: '' }],
    })
    const batch = normalizeLines([line], T)
    expect(batch.rejects).toEqual([])
    expect(batch.posts.map((p) => p.id)).toEqual(['20', '10', '11'])
    expect(batch.users.map((u) => u.username)).toEqual(['a'])
    const [reply] = batch.posts
    expect(reply).toMatchObject({
      conversation_id: '10',
      author_id: '7',
      in_reply_to_user_id: '8',
      in_reply_to_post_id: '10',
      observed_at: T,
    })
    expect(reply!.refs).toEqual([
      { type: 'replied_to', id: '10' },
      { type: 'quoted', id: '11' },
    ])
    expect(reply!.raw).not.toHaveProperty('matching_rules')
    expect(reply!.raw).toEqual(JSON.parse(line).data)
  })

  it('keeps only the type and id of a referenced_tweets item in raw, and the rest of raw as sent', () => {
    const refs = [{ type: 'quoted', id: '11', text: 'an inlined copy' }]
    const data = post('21', { referenced_tweets: refs, edit_history_tweet_ids: ['21'] })
    const [row] = normalizeLines([JSON.stringify({ data })], T).posts
    expect(row!.raw).toEqual({ ...data, referenced_tweets: [{ type: 'quoted', id: '11' }] })
    expect(refs[0]).toHaveProperty('text')
  })

  it('reads search pages and twarc2 pages', () => {
    const page = {
      data: [post('1'), post('2')],
      includes: { users: [] },
      meta: { result_count: 2 },
      __twarc: { version: '2' },
    }
    const batch = normalizeLines([JSON.stringify(page)], T)
    expect(batch.posts.map((p) => p.id)).toEqual(['1', '2'])
  })

  it('reads twarc2 flattened Posts, keeping the inlined author and dropping twarc keys', () => {
    const flat = {
      ...post('30', { author_id: '9' }),
      author: { id: '9', name: 'N', username: 'n' },
      __twarc: { url: 'x' },
    }
    const batch = normalizeLines([JSON.stringify(flat)], T)
    expect(batch.users.map((u) => u.id)).toEqual(['9'])
    expect(batch.posts[0]!.raw).not.toHaveProperty('author')
    expect(batch.posts[0]!.raw).not.toHaveProperty('__twarc')
  })

  it('counts error-only lines as empty, not as rejects', () => {
    const batch = normalizeLines(
      [JSON.stringify({ errors: [{ title: 'operational-disconnect' }] })],
      T,
    )
    expect(batch).toMatchObject({ posts: [], rejects: [], empty: 1 })
  })

  it('prefers the primary copy over the one in includes, and the later line over the earlier', () => {
    const a = JSON.stringify({ data: post('5', { lang: 'en' }) })
    const b = JSON.stringify({ data: post('6'), includes: { tweets: [post('5', { lang: 'fr' })] } })
    const c = JSON.stringify({ data: post('5', { lang: 'es' }) })
    expect(normalizeLines([a, b], T).posts.find((p) => p.id === '5')!.lang).toBe('en')
    expect(normalizeLines([a, b, c], T).posts.find((p) => p.id === '5')!.lang).toBe('es')
  })

  it('marks copies seen only in includes, and a later primary copy as primary', () => {
    const line = JSON.stringify({
      data: post('20'),
      includes: { tweets: [post('10'), post('11')] },
    })
    const twarc = JSON.stringify({
      ...post('30'),
      referenced_tweets: [{ type: 'quoted', ...post('10') }],
    })
    const again = JSON.stringify({ data: post('10') })
    const batch = normalizeLines([line, twarc, again], T)
    expect(batch.posts.map((p) => [p.id, p.included])).toEqual([
      ['20', false],
      ['10', false],
      ['11', true],
      ['30', false],
    ])
  })

  it('leaves out included copies that skipIncluded names, never a primary Post', () => {
    const line = JSON.stringify({
      data: post('20'),
      includes: { tweets: [post('10'), post('11')] },
    })
    const twarc = JSON.stringify({
      ...post('30'),
      referenced_tweets: [{ type: 'quoted', ...post('10') }],
    })
    const again = JSON.stringify({ data: post('10') })
    const skipIncluded = (id: string) => id === '10' || id === '20' || id === '30'
    const batch = normalizeLines([line, twarc, again], T, { skipIncluded })
    expect(batch.posts.map((p) => [p.id, p.included])).toEqual([
      ['20', false],
      ['11', true],
      ['30', false],
      ['10', false],
    ])
  })

  it('derives created_at from a snowflake id when it is missing', () => {
    const batch = normalizeLines(
      [JSON.stringify({ data: { id: '1460323737035677698', text: 'x' } })],
      T,
    )
    expect(batch.posts[0]!.created_at).toBe('2021-11-15T19:08:05.069Z')
    expect(
      normalizeLines([JSON.stringify({ data: { id: '20', text: 'x' } })], T).rejects[0]!.reason,
    ).toBe('Post 20 has no created_at')
  })

  it('rejects a bad Post of a page with the Post alone, and stores the others', () => {
    const page = { data: [post('1'), { id: 'x', text: 'bad' }, post('3')] }
    const batch = normalizeLines([JSON.stringify(page)], T)
    expect(batch.posts.map((p) => p.id)).toEqual(['1', '3'])
    expect(batch.rejects).toEqual([
      { reason: 'Post id "x" is not 1-19 digits', raw: '{"id":"x","text":"bad"}' },
    ])
  })

  it('rejects each kind of structural fault with a reason', () => {
    const cases: Array<[unknown, RegExp]> = [
      [{ data: { text: 'x' } }, /has no id/],
      [{ data: { id: '1' } }, /has no text/],
      [
        { data: post('1', { referenced_tweets: [{ type: 'liked', id: '2' }] }) },
        /invalid referenced_tweets/,
      ],
      [{ data: post('1', { public_metrics: { like_count: -1 } }) }, /like_count/],
      [{ data: post('1', { conversation_id: 12 }) }, /conversation_id 12/],
      [{ data: post('1', { text: 'a\u0000b' }) }, /\\u0000/],
      [{ data: 'nope' }, /neither a Post nor a list/],
      [{ hello: 'world' }, /not a Post, stream line or response page/],
    ]
    for (const [value, reason] of cases) {
      const batch = normalizeLines([JSON.stringify(value)], T)
      expect(batch.posts).toEqual([])
      expect(batch.rejects[0]?.reason).toMatch(reason)
    }
  })

  it('keeps the raw text of a line with a NUL storable', () => {
    const batch = normalizeLines([JSON.stringify({ data: post('1', { text: 'a\u0000b' }) })], T)
    expect(batch.rejects[0]!.raw).not.toContain('\u0000')
  })
})
