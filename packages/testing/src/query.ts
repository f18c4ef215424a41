/**
 * Test support for the query language (`@threadline/testing/query`): a fixed corpus with the expected answer of every
 * operator, and fast-check generators of Posts and queries. The unit tests run the cases through
 * the matcher; the integration tests run the same cases through SQL on real Postgres.
 */
import fc from 'fast-check'
import type { Includes, WirePost, WireUser } from '@threadline/domain'

export const USERS: WireUser[] = [
  { id: '11', name: 'Alice', username: 'Alice' },
  { id: '12', name: 'Bob', username: 'bob_1' },
  // A username made of digits that is also another user's id: `from:12` matches both.
  { id: '13', name: 'Digits', username: '12' },
]
export const INCLUDES: Includes = { users: USERS }

const post = (id: string, text: string, extra: Partial<WirePost> = {}): WirePost => ({
  id,
  text,
  author_id: '11',
  conversation_id: id,
  created_at: '2026-11-20T10:00:00.000Z',
  ...extra,
})

export const CORPUS: WirePost[] = [
  post('101', 'Drinking a Coca-Cola with my friends', { lang: 'en' }),
  post('102', 'coca and cola are two words; cola coca', { lang: 'en', author_id: '12' }),
  post('103', 'Bonjour #Paris @Alice $TSLA', {
    lang: 'fr',
    author_id: '13',
    entities: { hashtags: [{ start: 8, end: 14, tag: 'Paris' }] },
  }),
  post('104', 'replying here', {
    conversation_id: '101',
    in_reply_to_user_id: '11',
    author_id: '12',
    referenced_tweets: [{ type: 'replied_to', id: '101' }],
  }),
  post('105', 'look at this https://t.co/abc', {
    conversation_id: '101',
    referenced_tweets: [{ type: 'quoted', id: '102' }],
    entities: {
      urls: [
        {
          start: 13,
          end: 29,
          url: 'https://t.co/abc',
          expanded_url: 'https://Example.com/news/today',
        },
      ],
    },
    attachments: { media_keys: ['3_1'] },
  }),
  post('106', 'RT @bob_1: coca and cola', {
    referenced_tweets: [{ type: 'retweeted', id: '102' }],
    author_id: '13',
    entities: { mentions: [{ start: 3, end: 9, username: 'bob_1' }] },
  }),
  post('107', 'Straße ÜBER straße 日本語のテキスト 50% off a_b', {
    in_reply_to_user_id: '13',
    referenced_tweets: [
      { type: 'replied_to', id: '103' },
      { type: 'quoted', id: '101' },
    ],
  }),
  post('108', 'it\'s "quoted" and back\\slash O\'Brien 100%', { author_id: '12' }),
]

/** Query → the ids of CORPUS it matches (with INCLUDES as the users). */
export const CASES: Array<[string, string[]]> = [
  ['coca', ['101', '102', '106']],
  ['COCA', ['101', '102', '106']],
  ['coca-cola', ['101']],
  ['"coca cola"', ['101']],
  ['"cola coca"', ['102']],
  ['coca cola', ['101', '102', '106']],
  ['coca -cola', []],
  ['coca -drinking', ['102', '106']],
  ['coca OR bonjour', ['101', '102', '103', '106']],
  ['bonjour OR coca friends', ['101', '103']],
  ['(bonjour OR coca) -friends', ['102', '103', '106']],
  ['#paris', ['103']],
  ['#PARIS', ['103']],
  ['paris', ['103']],
  ['@alice', ['103']],
  ['@bob_1', ['106']],
  ['$tsla', ['103']],
  ['from:alice', ['101', '105', '107']],
  ['from:Alice', ['101', '105', '107']],
  ['from:@alice', ['101', '105', '107']],
  ['from:11', ['101', '105', '107']],
  ['from:12', ['102', '103', '104', '106', '108']],
  ['from:bob_1', ['102', '104', '108']],
  ['to:alice', ['104']],
  ['to:13', ['107']],
  ['to:12', ['107']],
  ['conversation_id:101', ['101', '104', '105']],
  ['conversation_id:0101', ['101', '104', '105']],
  ['in_reply_to_tweet_id:101', ['104']],
  ['in_reply_to_status_id:103', ['107']],
  ['quotes_of_tweet_id:102', ['105']],
  ['quotes_of_status_id:101', ['107']],
  ['retweets_of_tweet_id:102', ['106']],
  ['retweets_of_status_id:102', ['106']],
  ['url:"example.com"', ['105']],
  ['url:example.com/news', ['105']],
  ['url:"news example"', []],
  ['url:t.co', ['105']],
  ['look is:quote', ['105']],
  ['coca is:retweet', ['106']],
  ['here is:reply', ['104']],
  ['straße is:reply', ['107']],
  ['coca -is:retweet', ['101', '102']],
  ['look has:media', ['105']],
  ['look has:links', ['105']],
  ['coca has:mentions', ['106']],
  ['bonjour has:hashtags', ['103']],
  ['bonjour has:cashtags', ['103']],
  ['coca lang:en', ['101', '102']],
  ['coca lang:EN', ['101', '102']],
  ['coca -lang:en', ['106']],
  ['strasse', ['107']],
  ['STRASSE', ['107']],
  ['straße über', ['107']],
  ['日本', ['107']],
  ['"テキスト"', ['107']],
  ['"50% off"', ['107']],
  ['a_b', ['107']],
  ['"a b"', ['107']],
  ['100%', ['108']],
  ["O'Brien", ['108']],
  ['"back\\slash"', ['108']],
  ['"it s"', ['108']],
  ['quoted', ['108']],
  ["'; DROP TABLE posts; x", []],
]

// --- generators -------------------------------------------------------------------------------

const WORDS = ['alpha', 'beta', 'Gamma', 'coca', 'cola', 'the', 'Über', 'straße', '日本', '100%']
const SEPARATORS = [' ', ' ', ' ', '-', ', ', '! ', '\n', ' #', ' @', ' $', '_']
const IDS = ['1', '2', '3', '4']

const maybe = <T>(arb: fc.Arbitrary<T>): fc.Arbitrary<T | undefined> =>
  fc.option(arb, { nil: undefined })

/** A Post's text: vocabulary words joined by separators that make hashtags, mentions, phrases. */
const textArb = fc
  .array(fc.tuple(fc.constantFrom(...WORDS), fc.constantFrom(...SEPARATORS)), { maxLength: 8 })
  .map((parts) => parts.map(([w, s]) => s + w).join(''))

/** Posts without ids (the caller numbers them so they are unique). */
export const postArb: fc.Arbitrary<Omit<WirePost, 'id'>> = fc
  .record({
    text: textArb,
    author_id: maybe(fc.constantFrom('11', '12', '13', '14')),
    conversation_id: maybe(fc.constantFrom(...IDS)),
    in_reply_to_user_id: maybe(fc.constantFrom('11', '12', '13')),
    lang: maybe(fc.constantFrom('en', 'fr', 'EN')),
    refs: fc.uniqueArray(
      fc.record({
        type: fc.constantFrom('replied_to', 'quoted', 'retweeted') as fc.Arbitrary<
          'replied_to' | 'quoted' | 'retweeted'
        >,
        id: fc.constantFrom(...IDS),
      }),
      { maxLength: 2, selector: (r) => r.type },
    ),
    hashtags: fc.array(fc.constantFrom('alpha', 'Beta', 'ÜBER'), { maxLength: 2 }),
    mentions: fc.array(fc.constantFrom('alice', 'BOB_1'), { maxLength: 1 }),
    url: maybe(fc.constantFrom('https://example.com/alpha/beta', 'http://x.org/coca-cola')),
    media: fc.boolean(),
  })
  .map((r) => {
    const p: Omit<WirePost, 'id'> = { text: r.text, created_at: '2026-11-20T10:00:00.000Z' }
    if (r.author_id) p.author_id = r.author_id
    if (r.conversation_id) p.conversation_id = r.conversation_id
    if (r.in_reply_to_user_id) p.in_reply_to_user_id = r.in_reply_to_user_id
    if (r.lang) p.lang = r.lang
    if (r.refs.length > 0) p.referenced_tweets = r.refs
    const entities: Record<string, unknown> = {}
    if (r.hashtags.length > 0)
      entities.hashtags = r.hashtags.map((tag) => ({ start: 0, end: 1, tag }))
    if (r.mentions.length > 0)
      entities.mentions = r.mentions.map((username) => ({ start: 0, end: 1, username }))
    if (r.url) entities.urls = [{ start: 0, end: 1, url: 'https://t.co/x1', expanded_url: r.url }]
    if (Object.keys(entities).length > 0) p.entities = entities
    if (r.media) p.attachments = { media_keys: ['3_1'] }
    return p
  })

const atomArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...WORDS) },
  {
    weight: 2,
    arbitrary: fc
      .tuple(fc.constantFrom(...WORDS), fc.constantFrom(...WORDS))
      .map(([a, b]) => `"${a} ${b}"`),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom('#alpha', '#über', '#beta', '@alice', '@bob_1', '$coca'),
  },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      'from:alice',
      'from:12',
      'from:14',
      'to:bob_1',
      'to:11',
      'conversation_id:1',
      'conversation_id:2',
      'in_reply_to_tweet_id:1',
      'quotes_of_tweet_id:2',
      'retweets_of_status_id:3',
      'url:"example.com/alpha"',
      'url:coca-cola',
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      'is:reply',
      'is:quote',
      'is:retweet',
      'has:media',
      'has:links',
      'has:mentions',
      'has:hashtags',
      'lang:en',
    ),
  },
)

/** Query strings of the language; some are refused by the parser's checks (callers skip those). */
export const queryArb: fc.Arbitrary<string> = fc.letrec<{ q: string; term: string }>((tie) => ({
  term: fc.oneof(
    { weight: 5, arbitrary: atomArb },
    { weight: 1, arbitrary: atomArb.map((a) => `-${a}`) },
    { weight: 1, arbitrary: tie('q').map((q) => `(${q})`) },
    { weight: 1, arbitrary: tie('q').map((q) => `-(${q})`) },
  ),
  q: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    tie('term'),
    fc.array(tie('term'), { minLength: 2, maxLength: 3 }).map((ts) => ts.join(' ')),
    fc.array(tie('term'), { minLength: 2, maxLength: 3 }).map((ts) => ts.join(' OR ')),
  ),
})).q
