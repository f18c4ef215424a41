import { createHmac } from 'node:crypto'
import fc from 'fast-check'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { ChildProcess } from 'node:child_process'
import { maxHeaderSize } from 'node:http'
import { readFileSync } from 'node:fs'
import { apiTokenSecrets, createApp, findApp, storeBatch } from '@threadline/db'
import { normalizeLines } from '@threadline/domain'
import { createTestEnv, generateConversation, type TestEnv } from '@threadline/testing'
import {
  authArb,
  extraHeaders,
  idArb,
  PARAM_NAMES,
  paramValue,
  queryArb,
  rulesBody,
  subscriptionBody,
  webhookBody,
} from './generators.js'
import { forkApi } from '../support/api.js'

/**
 * The API under hostile, grammar-aware input (docs/operations.md, "Hostile input"): the real
 * server on loopback with real Postgres and Redis, in a child process (forkApi). Fails on a 5xx,
 * an answer slower than SLOW_MS, a stack trace or a secret in a body, or the server's RSS growing
 * past RSS_BOUND (measured in its own process: the fuzzer's memory is not counted).
 *
 * Seeded: the seed is printed; `FUZZ_SEED=<seed> pnpm test:fuzz` replays a run.
 */
const SEED = process.env.FUZZ_SEED ? Number(process.env.FUZZ_SEED) : Date.now() % 2_147_483_647
const SLOW_MS = 2_000
const RSS_BOUND = 128 * 1024 * 1024

let env: TestEnv
let server: ChildProcess
let base: string
let token: string
/** Strings no answer may hold. */
let secrets: string[]
/** Pagination tokens the server handed out, for the generators to replay and alter. */
const tokens: string[] = []
let rssAtStart = 0
/** How many answers of each status the run saw, printed at its end. */
const statuses = new Map<number, number>()
/** Requests with a body sent a second time after a reset (check), printed at the run's end. */
let resent = 0
/** The stored conversation's root, for the tree route. */
let rootId = '1'

beforeAll(async () => {
  console.log(`fuzz seed: ${SEED} (replay: FUZZ_SEED=${SEED} pnpm test:fuzz)`)
  env = await createTestEnv({
    API_RATE_LIMITS: 'lookup:1000000,search:1000000,counts:1000000,rules:1000000',
  })
  ;({ child: server, url: base } = await forkApi(
    env,
    (child) => ask(child, 'close', 'disconnect'),
    {
      options: { webhooksResolveToLoopback: true },
      env: { METRICS_PORT: '0' },
      execArgv: ['--expose-gc'],
    },
  ))
  const app = await createApp(env.db, 'fuzz')
  token = app.bearer_token
  const { current } = await apiTokenSecrets(env.db)
  const stored = await findApp(env.db, app.app_id)
  secrets = [current, app.consumer_secret, stored!.consumer_secret]
  const conversation = generateConversation({ size: 40, seed: 7, startMs: Date.now() - 3_600_000 })
  rootId = conversation.rootId
  await storeBatch(env.db, normalizeLines(conversation.lines, new Date().toISOString()), 'fuzz')
  // Real tokens to replay: a page of search and one of counts.
  for (const path of [
    '/2/tweets/search/recent?query=conversation_id%3A' + conversation.rootId + '&max_results=10',
    '/2/tweets/counts/all?query=coffee&granularity=minute&start_time=2026-01-01T00:00:00Z',
  ]) {
    const res = await fetch(base + path, { headers: { authorization: `Bearer ${token}` } })
    const body = (await res.json()) as { meta?: { next_token?: string } }
    if (body.meta?.next_token) tokens.push(body.meta.next_token)
  }
  rssAtStart = await serverRss()
}, 120_000)

/** Sends `message` to the child and waits for `event` (a message equal to it, or `disconnect`). */
function ask(child: ChildProcess, message: string, event: string): Promise<void> {
  if (!child.connected) return Promise.resolve()
  return new Promise((resolve) => {
    const done = (m?: unknown) => {
      if (event !== 'disconnect' && m !== event) return
      child.off('message', done)
      resolve()
    }
    if (event === 'disconnect') child.once('disconnect', done)
    else child.on('message', done)
    child.send(message)
  })
}

/** The server process's resident memory after a collection, from /proc (Linux). */
async function serverRss(): Promise<number> {
  await ask(server, 'gc', 'gc-done')
  const status = readFileSync(`/proc/${server.pid}/status`, 'utf8')
  const kb = /^VmRSS:\s+(\d+) kB$/m.exec(status)?.[1]
  if (!kb) throw new Error(`no VmRSS in /proc/${server.pid}/status`)
  return Number(kb) * 1024
}

afterAll(() => env?.close())

interface Sent {
  method: string
  path: string
  headers: Record<string, string>
  body?: string
}

/** Node's limit on a request's line and headers. */
const MAX_HEADER_BYTES = maxHeaderSize

function isReset(err: unknown): boolean {
  const code = ((err as { cause?: { code?: string } }).cause ?? {}).code
  return code === 'ECONNRESET' || code === 'EPIPE'
}

/** Sends one request and checks the answer; a stream's answer is checked up to its headers. */
async function check(req: Sent, { stream = false } = {}): Promise<void> {
  const started = performance.now()
  const abort = new AbortController()
  const timer = setTimeout(() => abort.abort(), 30_000)
  let status: number
  let text = ''
  const send = () =>
    fetch(base + req.path, {
      method: req.method,
      headers: req.headers,
      body: req.body,
      signal: abort.signal,
    })
  try {
    let res: Response
    try {
      res = await send()
    } catch (err) {
      // A request with a body whose connection was reset while it was being written, sent again
      // once on a new connection as a client would: fetch never retries a POST or a PUT on a
      // reused connection the other side closed (RFC 9112 §9.3.1). A second reset fails the run.
      if (!(req.body !== undefined && isReset(err))) throw err
      resent++
      res = await send()
    }
    status = res.status
    if (stream && status === 200) abort.abort()
    else text = await res.text()
  } catch (err) {
    // Node answers a request line over its header limit with 431 and closes at once; a client
    // still writing the rest of it sees the connection reset instead of the answer.
    if (!(req.path.length > MAX_HEADER_BYTES && isReset(err))) throw err
    status = 431
  } finally {
    clearTimeout(timer)
  }
  const ms = performance.now() - started
  statuses.set(status, (statuses.get(status) ?? 0) + 1)
  const what = `${req.method} ${req.path.slice(0, 300)} body=${(req.body ?? '').slice(0, 300)} → ${status} ${text.slice(0, 300)}`
  expect(status, what).toBeLessThan(500)
  expect(ms, `answered in ${Math.round(ms)} ms: ${what}`).toBeLessThan(SLOW_MS)
  expect(text, what).not.toMatch(/\bat [^\n]*\.[jt]s:\d+|node_modules|Error: /)
  for (const s of secrets) expect(text.includes(s), `a secret in the body: ${what}`).toBe(false)
}

/** Percent-encoding; a lone surrogate becomes the invalid UTF-8 a hostile client would send. */
function enc(value: string): string {
  try {
    return encodeURIComponent(value)
  } catch {
    return `${encodeURIComponent(value.replace(/[\ud800-\udfff]/g, ''))}%ED%A0%80`
  }
}

const ROUTES: Array<{ method: string; path: fc.Arbitrary<string>; stream?: boolean }> = [
  { method: 'GET', path: fc.constant('/2/tweets') },
  { method: 'GET', path: idArb.map((id) => `/2/tweets/${enc(id)}`) },
  { method: 'GET', path: fc.constant('/2/tweets/search/recent') },
  { method: 'GET', path: fc.constant('/2/tweets/search/all') },
  { method: 'GET', path: fc.constant('/2/tweets/counts/recent') },
  { method: 'GET', path: fc.constant('/2/tweets/counts/all') },
  { method: 'GET', path: fc.constant('/2/tweets/search/stream/rules') },
  { method: 'GET', path: fc.constant('/2/tweets/search/stream'), stream: true },
  { method: 'GET', path: fc.constant('/2/activity/subscriptions') },
  {
    method: 'DELETE',
    path: idArb.map((id) => `/2/activity/subscriptions/${enc(id)}`),
  },
  { method: 'GET', path: fc.constant('/2/webhooks') },
  { method: 'DELETE', path: idArb.map((id) => `/2/webhooks/${enc(id)}`) },
  { method: 'PUT', path: idArb.map((id) => `/2/webhooks/${enc(id)}`) },
  { method: 'GET', path: fc.constant('/2/activity/stream'), stream: true },
  { method: 'GET', path: fc.constant('/2/conversations') },
  {
    method: 'GET',
    // The stored root is read when a value is generated, after beforeAll stored it.
    path: fc
      .oneof(
        idArb,
        fc.constant('').map(() => rootId),
      )
      .map((id) => `/2/conversations/${enc(id)}`),
  },
  { method: 'GET', path: fc.constantFrom('/health', '/ready', '/2/openapi.json', '/2/nope', '/') },
]

const encodedPairs = fc
  .array(
    fc
      .oneof(
        { weight: 9, arbitrary: fc.constantFrom(...PARAM_NAMES) },
        fc.string({ maxLength: 10 }),
      )
      .chain((name) => paramValue(name, tokens).map((value) => [name, value] as const)),
    { maxLength: 7 },
  )
  .map((pairs) => pairs.map(([k, v]) => `${enc(k)}=${enc(v)}`).join('&'))

/** Query strings: generated pairs, encoded, or raw text as a careless client would send it. */
const queryString = fc.oneof(
  { weight: 6, arbitrary: encodedPairs },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }).map((raw) => raw.replace(/[#\s]/g, '')) },
)

describe('fuzz: the API under hostile input', () => {
  it('every GET, PUT and DELETE route with generated parameters, ids, tokens and headers', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...ROUTES).chain((r) => r.path.map((path) => ({ ...r, path }))),
        queryString,
        authArb(token),
        extraHeaders,
        async (route, qs, auth, headers) => {
          await check(
            {
              method: route.method,
              path: qs ? `${route.path}?${qs}` : route.path,
              headers: { ...headers, ...(auth === undefined ? {} : { authorization: auth }) },
            },
            { stream: route.stream },
          )
        },
      ),
      { seed: SEED, numRuns: 3_000, endOnFailure: true },
    )
  })

  it('the query language, through search, counts and rules', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(
          '/2/tweets/search/recent',
          '/2/tweets/search/all',
          '/2/tweets/counts/recent',
          '/2/tweets/counts/all',
        ),
        queryArb,
        fc.constantFrom(
          '',
          '&granularity=minute',
          '&max_results=100',
          '&start_time=2020-01-01T00:00:00Z',
        ),
        async (path, query, extra) => {
          await check({
            method: 'GET',
            path: `${path}?query=${enc(query)}${extra}`,
            headers: { authorization: `Bearer ${token}` },
          })
        },
      ),
      { seed: SEED, numRuns: 1_500, endOnFailure: true },
    )
  })

  it('JSON bodies of every route that takes one', async () => {
    const bodies = [
      {
        method: 'POST',
        path: fc.constantFrom(
          '/2/tweets/search/stream/rules',
          '/2/tweets/search/stream/rules?dry_run=true',
          '/2/tweets/search/stream/rules?delete_all=true&dry_run=true',
        ),
        body: rulesBody,
      },
      { method: 'POST', path: fc.constant('/2/activity/subscriptions'), body: subscriptionBody },
      {
        method: 'PUT',
        path: idArb.map((id) => `/2/activity/subscriptions/${enc(id)}`),
        body: subscriptionBody,
      },
      { method: 'POST', path: fc.constant('/2/webhooks'), body: webhookBody },
    ]
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom(...bodies).chain((b) => fc.tuple(fc.constant(b.method), b.path, b.body)),
        authArb(token),
        extraHeaders,
        async ([method, path, body], auth, headers) => {
          await check({
            method,
            path,
            body,
            headers: {
              'content-type': 'application/json',
              ...headers,
              ...(auth === undefined ? {} : { authorization: auth }),
            },
          })
        },
      ),
      { seed: SEED, numRuns: 2_000, endOnFailure: true },
    )
  })

  it('pagination tokens signed with a leaked secret, claiming any position', async () => {
    // The token format of packages/api/src/page-token.ts: base64url(position) "." HMAC prefix.
    const forge = (scope: string, position: string) =>
      `${Buffer.from(position).toString('base64url')}.${createHmac('sha256', secrets[0]!)
        .update(scope)
        .update('\n')
        .update(position)
        .digest()
        .subarray(0, 12)
        .toString('base64url')}`
    const position = fc.oneof(
      fc.bigInt({ min: -(2n ** 70n), max: 2n ** 70n }).map(String),
      fc.date({ noInvalidDate: true }).map((d) => String(d.getTime())),
      fc.integer({ min: -400, max: 400 }).map((days) => String(Date.now() + days * 86_400_000)),
      idArb,
      fc.string({ maxLength: 30 }),
    )
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom('recent', 'all'),
        fc.constantFrom('counts', 'search'),
        fc.constantFrom('minute', 'hour', 'day'),
        position,
        async (kind, endpoint, granularity, at) => {
          const query = 'coffee'
          const counts = endpoint === 'counts'
          const scope = [`${endpoint}/${kind}`, query, '', '', '', '']
          if (counts) scope.push(granularity)
          const t = forge(scope.join('\n'), at)
          await check({
            method: 'GET',
            path: `/2/tweets/${endpoint}/${kind}?query=${query}${counts ? `&granularity=${granularity}` : ''}&next_token=${t}`,
            headers: { authorization: `Bearer ${token}` },
          })
        },
      ),
      { seed: SEED, numRuns: 300, endOnFailure: true },
    )
  })

  it('the server process did not grow past its bound', async () => {
    const grown = (await serverRss()) - rssAtStart
    const seen = [...statuses].sort(([a], [b]) => a - b).map(([s, n]) => `${s}: ${n}`)
    console.log(
      `fuzz: RSS grew ${Math.round(grown / 1048576)} MB over the run; answers ${seen.join(', ')}; ${resent} sent again after a reset`,
    )
    expect(grown).toBeLessThan(RSS_BOUND)
  })
})
