import { startTestWriter } from '../support/writer.js'
import http from 'node:http'
import { buildServer, type ApiServer } from '@threadline/api'
import { addRules, createApp, createDb } from '@threadline/db'
import { formatPostTime, generateId, snowflakeTime } from '@threadline/domain'
import { createRedis } from '@threadline/redis'
import { waitFor, type TestEnv } from '@threadline/testing'
import { storeLines as writerStoreLines, type Writer } from '@threadline/writer'
import {
  registerFilteredStream,
  type FilteredStream,
  type FilteredStreamOptions,
} from '../../packages/api/src/stream/index.js'
import { testOptions } from '@threadline/testing/api'

export interface StreamServer {
  server: ApiServer
  stream: FilteredStream
  url: string
}

/** A listening API with the filtered stream over the test env's schema and prefix, closed at teardown. */
export async function startStreamServer(
  env: TestEnv,
  overrides: Partial<FilteredStreamOptions> = {},
): Promise<StreamServer> {
  const db = createDb({ url: env.databaseUrl, poolMax: 5 })
  const redis = createRedis(env.redisUrl, 'producer', 'api-stream-test')
  const server = buildServer(
    { db, redis, logger: env.logger, tokenSecrets: { current: 'test-secret' } },
    testOptions(env),
  )
  const stream = registerFilteredStream(server.app, {
    db,
    redis,
    logger: env.logger,
    options: {
      prefix: env.prefix,
      databaseUrl: env.databaseUrl,
      readBatch: 200,
      keepAliveMs: 10_000,
      maxConnectionsPerApp: 1,
      maxBufferedBytes: 4 * 1024 * 1024,
      connectionScope: 'cluster',
      ...overrides,
    },
  })
  env.defer(() => server.close())
  await server.start()
  return { server, stream, url: server.url() }
}

/**
 * True once `appId` has an open filtered stream on `api`. The route loads the app's rules, opens
 * the connection in the registry and attaches it to the hub in one run of microtasks, so from any
 * later callback (a waitFor poll) it means: every Post stored from now on reaches that stream. A
 * Post stored before it is not delivered (the stream is live; backfill_minutes is for the past).
 *
 * A boolean on purpose: waitFor once took any value but undefined and false as success, so a count
 * (`registry.connections(appId).size`) "succeeded" at 0, before the client was connected (waitFor
 * now takes only `true` as success, and refuses a count).
 */
export const streamConnected = (api: StreamServer, appId: string): boolean =>
  api.stream.registry.connections(appId).size > 0

/** Waits (with waitFor's deadline) until `appId` has an open filtered stream on `api`. */
export const waitForStream = (api: StreamServer, appId: string): Promise<void> =>
  waitFor('the stream connected', () => streamConnected(api, appId))

/** A writer (relaying to `<prefix>:stored`) with its own clients, closed at teardown. */
export const startWriter = (env: TestEnv): Promise<Writer> =>
  startTestWriter(env, { options: { maxStalledCount: 5, relayIntervalMs: 200 } })

/** Stores lines as the writer does and relays them to the `stored` stream at once. */
export async function store(env: TestEnv, writer: Writer, lines: string[]): Promise<void> {
  await writerStoreLines(env.db, lines, new Date().toISOString(), 'test')
  await writer.relay()
}

/** An app with a token and the given rules; returns the rule ids by value. */
export async function appWithRules(
  env: TestEnv,
  name: string,
  rules: Array<{ value: string; tag?: string }>,
): Promise<{ appId: string; token: string; ruleIds: Map<string, string> }> {
  const app = await createApp(env.db, name)
  const ruleIds = new Map<string, string>()
  if (rules.length > 0) {
    const added = await addRules(env.db, app.app_id, rules, { cap: 1000 })
    for (const r of added.created) ruleIds.set(r.value, r.id)
  }
  return { appId: app.app_id, token: app.bearer_token, ruleIds }
}

export interface UserSpec {
  id: string
  username: string
  name?: string
}

/** One filtered-stream line: a Post by `author`, optionally replying to / quoting others. */
export function postLine(p: {
  text: string
  author: UserSpec
  id?: string
  replyTo?: { id: string; author: UserSpec }
  quotes?: string
  extra?: Record<string, unknown>
}): { id: string; line: string } {
  const id = p.id ?? generateId()
  const data: Record<string, unknown> = {
    id,
    text: p.text,
    author_id: p.author.id,
    created_at: formatPostTime(snowflakeTime(id)!),
    conversation_id: id,
    lang: 'en',
    public_metrics: {
      retweet_count: 1,
      reply_count: 2,
      like_count: 3,
      quote_count: 0,
      bookmark_count: 0,
      impression_count: 10,
    },
    ...p.extra,
  }
  const users: unknown[] = [{ ...p.author, name: p.author.name ?? p.author.username }]
  const refs: Array<{ type: string; id: string }> = []
  if (p.replyTo) {
    data.in_reply_to_user_id = p.replyTo.author.id
    data.conversation_id = p.replyTo.id
    refs.push({ type: 'replied_to', id: p.replyTo.id })
    users.push({ ...p.replyTo.author, name: p.replyTo.author.name ?? p.replyTo.author.username })
  }
  if (p.quotes) refs.push({ type: 'quoted', id: p.quotes })
  if (refs.length > 0) data.referenced_tweets = refs
  return { id, line: JSON.stringify({ data, includes: { users } }) }
}

/**
 * A reply in conversation `conversationId`: postLine names the parent as the conversation, which
 * holds only for the root's own replies.
 */
export function replyIn(
  conversationId: string,
  p: Parameters<typeof postLine>[0] & { replyTo: { id: string; author: UserSpec } },
): { id: string; author: UserSpec; line: string } {
  const post = postLine(p)
  const parsed = JSON.parse(post.line) as { data: Record<string, unknown> }
  parsed.data.conversation_id = conversationId
  return { id: post.id, author: p.author, line: JSON.stringify(parsed) }
}

export interface RawStream {
  status: number
  headers: http.IncomingHttpHeaders
  /** The exact text of each `\r\n`-terminated line that was not a keep-alive. */
  lines: string[]
  /** Each `\r\n`-terminated message parsed; keep-alives counted apart. */
  messages: Array<Record<string, any>>
  keepAlives: number
  /** Anything not framed as `<json>\r\n` (a bare `\n`, a line that is not JSON, a cut tail). */
  badFraming: string[]
  /** The whole body of a non-200 answer. */
  body: string
  ended: boolean
  response: http.IncomingMessage
  close(): void
}

/**
 * A plain HTTP reader of a stream (the filtered stream by default, or `path`, e.g. the activity
 * stream) that checks X's framing as it goes.
 */
export async function openRawStream(
  url: string,
  token: string,
  query = '',
  closers?: { defer(fn: () => unknown): void },
  path = '/2/tweets/search/stream',
): Promise<RawStream> {
  const agent = new http.Agent({ keepAlive: false })
  return new Promise((resolve, reject) => {
    const req = http.get(
      `${url}${path}${query ? `?${query}` : ''}`,
      { headers: { authorization: `Bearer ${token}` }, agent },
      (res) => {
        const s: RawStream = {
          status: res.statusCode ?? 0,
          headers: res.headers,
          lines: [],
          messages: [],
          keepAlives: 0,
          badFraming: [],
          body: '',
          ended: false,
          response: res,
          close: () => {
            req.destroy()
            agent.destroy()
          },
        }
        closers?.defer(() => s.close())
        let buf = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          if (s.status !== 200) {
            s.body += chunk
            return
          }
          buf += chunk
          let i: number
          while ((i = buf.indexOf('\r\n')) >= 0) {
            const line = buf.slice(0, i)
            buf = buf.slice(i + 2)
            if (line === '') {
              s.keepAlives += 1
              continue
            }
            try {
              if (line.includes('\n')) throw new Error('bare \\n')
              s.messages.push(JSON.parse(line) as Record<string, any>)
              s.lines.push(line)
            } catch {
              s.badFraming.push(line)
            }
          }
        })
        const done = () => {
          s.ended = true
          if (buf !== '') s.badFraming.push(buf)
          buf = ''
        }
        res.on('end', done)
        res.on('close', done)
        res.on('error', () => undefined)
        resolve(s)
      },
    )
    req.on('error', reject)
  })
}

export type { ApiServer }
