import fc from 'fast-check'
import { HEAVY_TEST_MS, testSize } from '@threadline/testing'
import { describe, expect, it } from 'vitest'
import { parseQuery } from './parse.js'
import { conversationIdOf } from './inspect.js'
import { queryArb } from '@threadline/testing/query'

const ast = (q: string) => {
  const r = parseQuery(q)
  if (!r.ok) throw new Error(`${q}: ${r.errors.join(', ')}`)
  return r.ast
}
const errors = (q: string, opts?: { maxLength?: number }) => {
  const r = parseQuery(q, opts)
  return r.ok ? [] : r.errors
}

describe('parseQuery: operators', () => {
  it.each<[string, unknown]>([
    ['cat', { type: 'text', terms: ['cat'], phrase: false, raw: 'cat' }],
    ['Coca-Cola', { type: 'text', terms: ['coca', 'cola'], phrase: true, raw: 'Coca-Cola' }],
    [
      '"Hello  World"',
      { type: 'text', terms: ['hello', 'world'], phrase: true, raw: 'Hello  World' },
    ],
    ['#Tag', { type: 'entity', kind: 'hashtag', term: '#tag' }],
    ['@User_1', { type: 'entity', kind: 'mention', term: '@user_1' }],
    ['$TSLA', { type: 'entity', kind: 'cashtag', term: '$tsla' }],
    ['from:Alice', { type: 'user', role: 'from', username: 'alice' }],
    ['from:@alice', { type: 'user', role: 'from', username: 'alice' }],
    ['from:0042', { type: 'user', role: 'from', username: '0042', id: '42' }],
    ['to:bob', { type: 'user', role: 'to', username: 'bob' }],
    ['conversation_id:123', { type: 'id', field: 'conversation_id', id: '123' }],
    ['in_reply_to_tweet_id:5', { type: 'id', field: 'in_reply_to', id: '5' }],
    ['in_reply_to_status_id:5', { type: 'id', field: 'in_reply_to', id: '5' }],
    ['quotes_of_tweet_id:6', { type: 'id', field: 'quotes_of', id: '6' }],
    ['quotes_of_status_id:6', { type: 'id', field: 'quotes_of', id: '6' }],
    ['retweets_of_tweet_id:7', { type: 'id', field: 'retweets_of', id: '7' }],
    ['retweets_of_status_id:7', { type: 'id', field: 'retweets_of', id: '7' }],
    ['url:"https://Example.com/a"', { type: 'url', terms: ['/https', '/example', '/com', '/a'] }],
    [
      'https://x.co/a',
      { type: 'text', terms: ['https', 'x', 'co', 'a'], phrase: true, raw: 'https://x.co/a' },
    ],
    ['note:', { type: 'text', terms: ['note'], phrase: false, raw: 'note:' }],
  ])('%s', (q, expected) => {
    expect(ast(q)).toEqual(expected)
  })

  it('is, has and lang with a standalone clause', () => {
    expect(ast('cat is:reply')).toEqual({
      type: 'and',
      children: [
        { type: 'text', terms: ['cat'], phrase: false, raw: 'cat' },
        { type: 'is', value: 'reply' },
      ],
    })
    for (const v of ['reply', 'quote', 'retweet']) expect(parseQuery(`x is:${v}`).ok).toBe(true)
    for (const v of ['media', 'links', 'mentions', 'hashtags', 'cashtags'])
      expect(parseQuery(`x has:${v}`).ok).toBe(true)
    expect(ast('x lang:EN')).toMatchObject({ children: [{}, { type: 'lang', value: 'en' }] })
  })

  it('AND binds tighter than OR; negation; parentheses; flattening', () => {
    expect(ast('x y OR z')).toEqual({
      type: 'or',
      children: [{ type: 'and', children: [ast('x'), ast('y')] }, ast('z')],
    })
    expect(ast('x (y OR z) -w')).toEqual({
      type: 'and',
      children: [
        ast('x'),
        { type: 'or', children: [ast('y'), ast('z')] },
        { type: 'not', child: ast('w') },
      ],
    })
    expect(ast('x -(y OR "z w")')).toMatchObject({
      type: 'and',
      children: [{}, { type: 'not', child: { type: 'or' } }],
    })
    expect(ast('((x))')).toEqual(ast('x'))
    expect(ast('x or y')).toMatchObject({ type: 'and' }) // lower-case or is a word
  })

  it('conversationIdOf is defined only for a bare conversation_id rule', () => {
    expect(conversationIdOf(ast('conversation_id:00987'))).toBe('987')
    expect(conversationIdOf(ast('conversation_id:987 cat'))).toBeUndefined()
    expect(conversationIdOf(ast('cat'))).toBeUndefined()
  })
})

describe('parseQuery: errors', () => {
  it.each<[string, string[]]>([
    [
      'a AND b',
      [
        'Ambiguous use of and as a keyword. Use a space to logically join two clauses, or "and" to find occurrences of and in text (at position 3)',
      ],
    ],
    ['a b)', ["missing EOF at ')' (at position 4)"]],
    ['(a b', ["missing ')' at '<EOF>' (at position 5)"]],
    ['(((a b', ["missing ')' at '<EOF>' (at position 7)"]],
    [
      '(((',
      [
        "no viable alternative at input '<EOF>' (at position 4)",
        "missing ')' at '<EOF>' (at position 4)",
      ],
    ],
    ['', ["no viable alternative at input '<EOF>' (at position 1)"]],
    ['   ', ["no viable alternative at input '<EOF>' (at position 4)"]],
    ['a OR', ["no viable alternative at input '<EOF>' (at position 5)"]],
    ['OR a', ["no viable alternative at input 'OR' (at position 1)"]],
    ['a () b', ["no viable alternative at input ')' (at position 4)"]],
    ['a - b', ["no viable alternative at input '-' (at position 3)"]],
    ['a "open', [`no viable alternative at input '"open' (at position 3)`]],
    ['-a', ['Rules must contain a non-negation term (at position 1)']],
    ['-a -b', ['Rules must contain a non-negation term (at position 1)']],
    ['a OR -b', ['Rules must contain a non-negation term (at position 1)']],
    ['is:reply', ['is/has/lang cannot be used as a standalone operator (at position 1)']],
    ['has:media lang:en', ['is/has/lang cannot be used as a standalone operator (at position 1)']],
    ['cat OR lang:en', ['is/has/lang cannot be used as a standalone operator (at position 8)']],
    ['the', ['Rules must contain at least one positive, non-stopword clause (at position 1)']],
    [
      'the a -cat',
      ['Rules must contain at least one positive, non-stopword clause (at position 1)'],
    ],
    ['!!!', ['Rules must contain at least one positive, non-stopword clause (at position 1)']],
    ['cat foo:bar', ["Reference to invalid operator 'foo' (at position 5)"]],
    ['cat is:verified', ["Reference to invalid operator 'is:verified' (at position 5)"]],
    ['cat has:geo', ["Reference to invalid operator 'has:geo' (at position 5)"]],
    [
      'conversation_id:abc',
      ["Invalid value for conversation_id: 'abc' is not an id (at position 1)"],
    ],
    [
      'conversation_id:99999999999999999999',
      ["Invalid value for conversation_id: '99999999999999999999' is not an id (at position 1)"],
    ],
    ["from:x'--", ["Invalid value for from: 'x'--' (at position 1)"]],
    ['cat lang:"e n"', ["Invalid value for lang: 'e n' (at position 5)"]],
    ['from:', ["no viable alternative at input 'from:' (at position 1)"]],
    [
      'a AND b AND c foo:x',
      [
        'Ambiguous use of and as a keyword. Use a space to logically join two clauses, or "and" to find occurrences of and in text (at position 3)',
        'Ambiguous use of and as a keyword. Use a space to logically join two clauses, or "and" to find occurrences of and in text (at position 9)',
        "Reference to invalid operator 'foo' (at position 15)",
      ],
    ],
  ])('%j', (q, expected) => {
    expect(errors(q)).toEqual(expected)
  })

  it('length limits: 1024 by default, configurable, never above 4096', () => {
    expect(parseQuery('a'.repeat(1024)).ok).toBe(true)
    expect(errors('a'.repeat(1025))).toEqual([
      'Query length 1025 exceeds the maximum of 1024 characters (at position 1025)',
    ])
    expect(errors('a'.repeat(513), { maxLength: 512 })).toHaveLength(1)
    expect(parseQuery('x '.repeat(2048), { maxLength: 10_000 }).ok).toBe(true)
    expect(errors('x '.repeat(2049), { maxLength: 10_000 })[0]).toMatch(/maximum of 4096/)
  })

  it('deep nesting is refused, not a stack overflow', () => {
    expect(errors(`${'('.repeat(500)}a${')'.repeat(500)}`, { maxLength: 4096 })[0]).toMatch(
      /^Too many nested parentheses/,
    )
    expect(parseQuery(`${'('.repeat(60)}x${')'.repeat(60)}`).ok).toBe(true)
  })
})

describe('parseQuery is total', () => {
  const syntax = fc.constantFrom(
    ...'()"-: #@$_%\\\'\u0000\n\t'.split(''),
    'OR',
    'AND',
    'from:',
    'is:',
    'url:"',
    'conversation_id:',
    'a',
    'ß',
    '日',
    '\ud800',
  )
  it(
    'never throws on arbitrary strings',
    () => {
      fc.assert(
        fc.property(
          fc.oneof(
            fc.string({ unit: 'binary', maxLength: 300 }),
            fc.array(syntax, { maxLength: 60 }).map((a) => a.join('')),
          ),
          (q) => {
            const r = parseQuery(q)
            if (!r.ok) {
              expect(r.errors.length).toBeGreaterThan(0)
              for (const e of r.errors) expect(e).toMatch(/ \(at position \d+\)$/)
            }
          },
        ),
        { numRuns: testSize(600, 3000) },
      )
    },
    HEAVY_TEST_MS,
  )

  it(
    'accepts what the query generator makes or gives reasons',
    () => {
      fc.assert(
        fc.property(queryArb, (q) => {
          const r = parseQuery(q)
          expect(r.ok || r.errors.length > 0).toBe(true)
        }),
        { numRuns: testSize(200, 500) },
      )
    },
    HEAVY_TEST_MS,
  )
})
