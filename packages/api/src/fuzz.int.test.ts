import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import type { ApiServer } from './server.js'
import { startTestServer, storeLines } from './test-helpers.js'

let env: TestEnv
let server: ApiServer
let token: string

beforeAll(async () => {
  env = await createTestEnv()
  ;({ server, token } = await startTestServer(env, { ruleCap: 50 }))
  await storeLines(
    env.db,
    generateConversation({ size: 30, seed: 5, startMs: Date.now() - 3_600_000 }).lines,
  )
})
afterAll(() => env?.close())

const PATHS = [
  '/2/tweets',
  '/2/tweets/123',
  '/2/tweets/search/recent',
  '/2/tweets/search/all',
  '/2/tweets/counts/recent',
  '/2/tweets/counts/all',
  '/2/tweets/search/stream/rules',
]
const NAMES = [
  'ids',
  'id',
  'query',
  'max_results',
  'next_token',
  'pagination_token',
  'since_id',
  'until_id',
  'start_time',
  'end_time',
  'granularity',
  'sort_order',
  'tweet.fields',
  'post.fields',
  'expansions',
  'user.fields',
  'dry_run',
  'delete_all',
  'search_count.fields',
]
const HOSTILE = [
  "' OR 1=1 --",
  '"; DROP TABLE posts; --',
  '%00',
  '\u0000',
  '9'.repeat(40),
  '-1',
  '1e309',
  'NaN',
  '((((((((((((((((((((a))))))))))))))))))))',
  '"unterminated',
  'conversation_id:',
  'from:',
  '-a -b -c',
  'a OR OR b',
  '#',
  '@',
  '😀'.repeat(300),
  'x'.repeat(5_000),
  'lang:',
  'is:nothing',
  '2026-02-31T00:00:00Z',
  '9999-12-31T23:59:59Z',
  'created_at,author_id',
  'author_id,referenced_tweets.id',
  '%E0%A4%A',
  '\\',
  '%',
  'a AND b',
  '(a',
  'a)',
  ':',
  '***',
]
const value = fc.oneof(
  fc.constantFrom(...HOSTILE),
  fc.string({ maxLength: 60 }),
  fc.string({ unit: 'grapheme', maxLength: 30 }),
  fc.integer().map(String),
)
const pair = fc.tuple(fc.oneof(fc.constantFrom(...NAMES), fc.string({ maxLength: 10 })), value)

function checkProblem(status: number, body: Record<string, unknown>, contentType: unknown) {
  expect(status, JSON.stringify(body)).toBeLessThan(500)
  expect(contentType).toBe('application/json; charset=utf-8')
  if (status >= 400) {
    expect(typeof body.title).toBe('string')
    expect(typeof body.type).toBe('string')
    if (status === 400) expect(Array.isArray(body.errors)).toBe(true)
    expect(JSON.stringify(body)).not.toMatch(/at .*\.ts:\d+|node_modules/)
  }
}

describe('fuzz', () => {
  it('random and hostile parameters get 4xx JSON of X shape or 200, never a 5xx', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...PATHS),
        fc.array(pair, { maxLength: 6 }),
        async (path, pairs) => {
          const qs = pairs
            .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`)
            .join('&')
          const res = await server.app.inject({
            method: 'GET',
            url: `${path}?${qs}`,
            headers: { authorization: `Bearer ${token}` },
          })
          checkProblem(res.statusCode, res.json(), res.headers['content-type'])
        },
      ),
      { numRuns: 2_000 },
    )
  })

  it('raw, undecoded query strings', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...PATHS),
        fc.string({ maxLength: 200 }),
        async (path, raw) => {
          const res = await server.app.inject({
            method: 'GET',
            url: `${path}?${raw.replace(/[#\s]/g, '')}`,
            headers: { authorization: `Bearer ${token}` },
          })
          checkProblem(res.statusCode, res.json(), res.headers['content-type'])
        },
      ),
      { numRuns: 1_000 },
    )
  })

  it('valid parameters with hostile query strings reach the parser and SQL safely', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('/2/tweets/search/recent', '/2/tweets/search/all', '/2/tweets/counts/all'),
        fc.oneof(
          fc.constantFrom(...HOSTILE),
          fc.string({ maxLength: 80 }),
          fc.string({ unit: 'grapheme', maxLength: 40 }),
        ),
        async (path, q) => {
          const res = await server.app.inject({
            method: 'GET',
            url: `${path}?query=${encodeURIComponent(q)}`,
            headers: { authorization: `Bearer ${token}` },
          })
          checkProblem(res.statusCode, res.json(), res.headers['content-type'])
        },
      ),
      { numRuns: 1_000 },
    )
  })

  it('hostile rule bodies', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.json(),
          fc.string({ maxLength: 100 }),
          fc
            .record({
              add: fc.array(
                fc.record({ value: fc.oneof(fc.constantFrom(...HOSTILE), fc.string()) }),
                { maxLength: 3 },
              ),
            })
            .map((b) => JSON.stringify(b)),
          fc
            .record({
              delete: fc.record({
                ids: fc.array(fc.oneof(fc.constantFrom(...HOSTILE), fc.string())),
              }),
            })
            .map((b) => JSON.stringify(b)),
        ),
        fc.constantFrom('application/json', 'text/plain', 'application/json; charset=utf-8', ''),
        async (payload, type) => {
          const res = await server.app.inject({
            method: 'POST',
            url: '/2/tweets/search/stream/rules?dry_run=true',
            headers: {
              authorization: `Bearer ${token}`,
              ...(type ? { 'content-type': type } : {}),
            },
            payload,
          })
          checkProblem(res.statusCode, res.json(), res.headers['content-type'])
        },
      ),
      { numRuns: 500 },
    )
  })
})
