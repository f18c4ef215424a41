import fc from 'fast-check'

/**
 * Grammar-aware generators of hostile requests (docs/operations.md, "Hostile input"): each builds
 * what a route expects and then bends it, so that most requests get past the first check and
 * reach the deeper layers (the query parser, SQL, the repositories).
 */

/** Strings that broke something once, or that a layer might mishandle. */
export const HOSTILE = [
  "' OR 1=1 --",
  '"; DROP TABLE posts; --',
  '\u0000',
  'a\u0000b',
  '\\u0000',
  '\ud800',
  '9'.repeat(40),
  '-1',
  '1e309',
  'NaN',
  '%00',
  '%',
  '\\',
  '😀'.repeat(100),
  'x'.repeat(5_000),
  '${jndi:ldap://x}',
  '<script>',
  '\r\n',
  ' ',
  '',
] as const

const word = fc.constantFrom(
  'coffee',
  'tea',
  'the',
  'a',
  'Über',
  '日本',
  'x'.repeat(200),
  'café',
  'OR',
  'AND',
)

const operator = fc.constantFrom(
  'from:',
  'to:',
  'conversation_id:',
  'lang:',
  'is:',
  'has:',
  'url:',
  'retweets_of:',
  'place:',
  'sample:',
  'bogus:',
)
const operand = fc.oneof(
  fc.constantFrom('alice', 'en', 'retweet', 'reply', 'quote', 'links', 'media', 'mentions', ''),
  fc.bigInt({ min: 0n, max: 2n ** 64n }).map(String),
  fc.constantFrom(...HOSTILE),
)

const atom: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: word },
  { weight: 2, arbitrary: fc.tuple(operator, operand).map(([o, v]) => `${o}${v}`) },
  { weight: 1, arbitrary: word.map((w) => `#${w}`) },
  { weight: 1, arbitrary: word.map((w) => `@${w}`) },
  { weight: 1, arbitrary: word.map((w) => `"${w} ${w}"`) },
  { weight: 1, arbitrary: fc.constantFrom(...HOSTILE) },
  { weight: 1, arbitrary: fc.string({ maxLength: 12 }) },
)

/** The search/counts/rules query language, with its syntax bent now and then. */
export const queryArb: fc.Arbitrary<string> = fc
  .letrec<{ q: string; term: string }>((tie) => ({
    term: fc.oneof(
      { weight: 6, arbitrary: atom },
      { weight: 1, arbitrary: atom.map((a) => `-${a}`) },
      { weight: 1, arbitrary: tie('q').map((q) => `(${q})`) },
      { weight: 1, arbitrary: tie('q').map((q) => `-(${q})`) },
    ),
    q: fc.oneof(
      { depthSize: 'small', withCrossShrink: true },
      tie('term'),
      fc.array(tie('term'), { minLength: 2, maxLength: 4 }).map((ts) => ts.join(' ')),
      fc.array(tie('term'), { minLength: 2, maxLength: 4 }).map((ts) => ts.join(' OR ')),
    ),
  }))
  .q.chain((q) =>
    fc.oneof(
      { weight: 8, arbitrary: fc.constant(q) },
      // Unbalanced, deeply nested, or too long.
      { weight: 1, arbitrary: fc.nat({ max: 100 }).map((n) => '('.repeat(n) + q + ')'.repeat(n)) },
      { weight: 1, arbitrary: fc.constantFrom(`(${q}`, `${q})`, `${q} OR`, `OR ${q}`) },
      { weight: 1, arbitrary: fc.nat({ max: 600 }).map((n) => `${q} `.repeat(n)) },
    ),
  )

/** 64-bit ids and their near misses. */
export const idArb: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: fc.bigInt({ min: 1n, max: 2n ** 63n - 1n }).map(String) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      '0',
      '1',
      '9223372036854775807',
      '9223372036854775808',
      '18446744073709551616',
      '0000000000000000001',
      '-1',
      '1.5',
      '0x10',
      '1e3',
      ' 1',
    ),
  },
  { weight: 1, arbitrary: fc.constantFrom(...HOSTILE) },
)

const timeArb = fc.oneof(
  fc
    .date({
      min: new Date('1969-01-01T00:00:00Z'),
      max: new Date('2100-01-01T00:00:00Z'),
      noInvalidDate: true,
    })
    .map((d) => d.toISOString().replace(/\.\d{3}Z$/, 'Z')),
  fc.constantFrom(
    '9999-12-31T23:59:59Z',
    '0000-01-01T00:00:00Z',
    '2026-02-31T00:00:00Z',
    '2026-11-20T10:00:00+00:00',
    '2026-11-20T10:00:00+14:00',
    '2026-11-20',
    'yesterday',
  ),
)

const listOf = (values: readonly string[]) =>
  fc
    .array(
      fc.oneof({ weight: 5, arbitrary: fc.constantFrom(...values) }, fc.string({ maxLength: 8 })),
      {
        maxLength: 6,
      },
    )
    .map((v) => v.join(','))

const FIELDS = ['created_at', 'author_id', 'conversation_id', 'text', 'public_metrics', 'lang']
const EXPANSIONS = ['author_id', 'referenced_tweets.id', 'in_reply_to_user_id']

/** Values for every query parameter name any route knows, each in the shape it expects, or not. */
export function paramValue(name: string, tokens: readonly string[]): fc.Arbitrary<string> {
  const typed: Record<string, fc.Arbitrary<string>> = {
    query: queryArb,
    ids: fc.array(idArb, { maxLength: 120 }).map((v) => v.join(',')),
    id: idArb,
    since_id: idArb,
    until_id: idArb,
    max_results: fc.oneof(
      fc.integer({ min: -5, max: 1_200 }).map(String),
      fc.constantFrom('1e3', '10.5'),
    ),
    start_time: timeArb,
    end_time: timeArb,
    granularity: fc.constantFrom('minute', 'hour', 'day', 'week', 'MINUTE'),
    next_token: tokenArb(tokens),
    pagination_token: tokenArb(tokens),
    'tweet.fields': listOf(FIELDS),
    'post.fields': listOf(FIELDS),
    'user.fields': listOf(['username', 'name', 'created_at', 'verified']),
    expansions: listOf(EXPANSIONS),
    'search_count.fields': listOf(['end', 'start', 'tweet_count']),
    'webhook_config.fields': listOf(['created_at', 'id', 'url', 'valid']),
    sort_order: fc.constantFrom('recency', 'relevancy', 'random'),
    dry_run: fc.constantFrom('true', 'false', 'TRUE', '1', 'yes'),
    delete_all: fc.constantFrom('true', 'false'),
    backfill_minutes: fc.integer({ min: -1, max: 7 }).map(String),
    sort: fc.constantFrom('oldest', 'newest', 'top', 'random'),
  }
  return fc.oneof(
    {
      weight: 6,
      arbitrary: Object.hasOwn(typed, name) ? typed[name]! : fc.string({ maxLength: 20 }),
    },
    { weight: 1, arbitrary: fc.constantFrom(...HOSTILE) },
  )
}

export const PARAM_NAMES = [
  'query',
  'ids',
  'since_id',
  'until_id',
  'max_results',
  'start_time',
  'end_time',
  'granularity',
  'next_token',
  'pagination_token',
  'tweet.fields',
  'post.fields',
  'user.fields',
  'expansions',
  'search_count.fields',
  'webhook_config.fields',
  'sort_order',
  'dry_run',
  'delete_all',
  'backfill_minutes',
  'sort',
] as const

/** Pagination tokens: ones the server handed out, altered ones, and made-up ones. */
export function tokenArb(tokens: readonly string[]): fc.Arbitrary<string> {
  const real = tokens.length > 0 ? fc.constantFrom(...tokens) : fc.constant('AAAA.BBBB')
  return fc.oneof(
    real,
    real.chain((t) =>
      fc
        .nat({ max: Math.max(0, t.length - 1) })
        .map((i) => `${t.slice(0, i)}${t[i] === 'A' ? 'B' : 'A'}${t.slice(i + 1)}`),
    ),
    fc.base64String({ maxLength: 80 }).map((s) => s.replace(/\+/g, '-').replace(/\//g, '_')),
    fc
      .tuple(fc.string({ maxLength: 30 }), fc.uint8Array({ maxLength: 12 }))
      .map(
        ([p, mac]) =>
          `${Buffer.from(p).toString('base64url')}.${Buffer.from(mac).toString('base64url')}`,
      ),
    fc.constantFrom('.', 'a.', '.a', 'x'.repeat(300), '%00'),
  )
}

/** A JSON value of bounded size whose leaves are hostile now and then. */
export const hostileJson: fc.Arbitrary<unknown> = fc.letrec<{ v: unknown }>((tie) => ({
  v: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    fc.constantFrom(...HOSTILE),
    fc.string({ maxLength: 20 }),
    fc.integer(),
    fc.double(),
    fc.boolean(),
    fc.constant(null),
    fc.array(tie('v'), { maxLength: 4 }),
    fc.dictionary(fc.string({ maxLength: 8 }), tie('v'), { maxKeys: 4 }),
  ),
})).v

const leaf = fc.oneof(
  { weight: 4, arbitrary: queryArb },
  { weight: 2, arbitrary: fc.constantFrom(...HOSTILE) },
  { weight: 1, arbitrary: hostileJson },
)

/** Text nested `n` deep, valid JSON. */
const deep = (n: number) => '['.repeat(n) + ']'.repeat(n)

/** A body text from a JSON value, or bent: nested deep, truncated, or not JSON at all. */
function bodyText(value: fc.Arbitrary<unknown>): fc.Arbitrary<string> {
  return fc.oneof(
    { weight: 8, arbitrary: value.map((v) => JSON.stringify(v) ?? 'null') },
    { weight: 1, arbitrary: fc.integer({ min: 10, max: 20_000 }).map((n) => `{"add":${deep(n)}}`) },
    { weight: 1, arbitrary: value.map((v) => (JSON.stringify(v) ?? '').slice(0, -1)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 100 }) },
  )
}

/** `POST /2/tweets/search/stream/rules` bodies (docs/api.md §3.2). */
export const rulesBody = bodyText(
  fc.oneof(
    fc.record({
      add: fc.oneof(
        fc.array(
          fc.record(
            {
              value: leaf,
              tag: fc.oneof(fc.string({ maxLength: 20 }), fc.constantFrom(...HOSTILE), hostileJson),
            },
            { requiredKeys: ['value'] },
          ),
          { maxLength: 8 },
        ),
        fc
          .integer({ min: 990, max: 1_100 })
          .map((n) => Array.from({ length: n }, (_, i) => ({ value: `w${i}` }))),
        hostileJson,
      ),
    }),
    fc.record({
      delete: fc.oneof(
        fc.record({ ids: fc.array(idArb, { maxLength: 20 }) }),
        fc.record({ values: fc.array(leaf, { maxLength: 8 }) }),
        fc
          .integer({ min: 990, max: 70_000 })
          .map((n) => ({ ids: Array.from({ length: n }, (_, i) => String(i + 1)) })),
        hostileJson,
      ),
    }),
    hostileJson,
  ),
)

const eventType = fc.oneof(
  fc.constantFrom(
    'post.create',
    'post.reply.create',
    'post.quote.create',
    'post.mention.create',
    'nope',
  ),
  fc.constantFrom(...HOSTILE),
)

/** `POST /2/activity/subscriptions` and `PUT …/:id` bodies (docs/api.md §4.2). */
export const subscriptionBody = bodyText(
  fc.record(
    {
      event_type: fc.oneof(eventType, hostileJson),
      filter: fc.oneof(
        fc.record(
          {
            user_id: fc.oneof(idArb, hostileJson),
            keyword: fc.oneof(
              fc.string({ maxLength: 160 }),
              fc.constantFrom(...HOSTILE),
              hostileJson,
            ),
          },
          { requiredKeys: [] },
        ),
        hostileJson,
      ),
      tag: fc.oneof(fc.string({ maxLength: 210 }), fc.constantFrom(...HOSTILE), hostileJson),
      webhook_id: fc.oneof(idArb, hostileJson),
    },
    { requiredKeys: [] },
  ),
)

/**
 * Webhook URLs whose host is refused by the address policy or does not resolve (the suite resolves
 * every name to loopback): a fuzzed CRC check never leaves this machine.
 */
const refusedHost = fc.constantFrom(
  '127.0.0.1',
  '[::1]',
  '[::169.254.169.254]',
  '[::ffff:169.254.169.254]',
  '[::ffff:a9fe:a9fe]',
  '[64:ff9b::a9fe:a9fe]',
  '[2002:a9fe:a9fe::1]',
  '[fe80::1]',
  '0x7f.1',
  '2130706433',
  '0177.0.0.1',
  'localhost',
  'example.invalid',
  'metadata.google.internal',
  '169.254.169.254',
  '10.0.0.1',
  '[::]',
  '0',
)
export const webhookBody = bodyText(
  fc.record(
    {
      url: fc.oneof(
        fc
          .tuple(
            fc.constantFrom('https', 'http', 'ftp', 'file', 'javascript', ''),
            refusedHost,
            fc.nat({ max: 70_000 }),
            fc.string({ maxLength: 20 }),
          )
          .map(
            ([scheme, host, port, path]) =>
              `${scheme}://${host}:${port}/${encodeURIComponent(path)}`,
          ),
        fc.constantFrom(...HOSTILE),
        hostileJson,
      ),
    },
    { requiredKeys: [] },
  ),
)

const printable = fc.string({
  unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
  maxLength: 600,
})

/** Authorization headers: the valid one mostly, else near misses and garbage. */
export function authArb(token: string): fc.Arbitrary<string | undefined> {
  return fc.oneof(
    { weight: 12, arbitrary: fc.constant(`Bearer ${token}`) },
    {
      weight: 1,
      arbitrary: fc.constantFrom(
        undefined,
        `bearer ${token}`,
        `Bearer  ${token}`,
        `Bearer ${token}x`,
        `Basic ${token}`,
        'Bearer',
        `Bearer ${'x'.repeat(600)}`,
      ),
    },
    { weight: 1, arbitrary: printable.map((p) => `Bearer ${p}`) },
  )
}

/** Other headers a client might send: request ids, content types, encodings. */
export const extraHeaders: fc.Arbitrary<Record<string, string>> = fc.record(
  {
    'x-request-id': fc.oneof(printable, fc.constantFrom('../../etc/passwd', 'x'.repeat(100))),
    'content-type': fc.constantFrom(
      'application/json',
      'application/json; charset=utf-8',
      'APPLICATION/JSON',
      'text/plain',
      'application/x-www-form-urlencoded',
      'multipart/form-data; boundary=x',
      'application/jsonx',
    ),
    accept: fc.constantFrom('*/*', 'application/json', 'text/html'),
    'accept-encoding': fc.constantFrom('gzip', 'br', 'identity', 'x'),
  },
  { requiredKeys: [] },
)
