import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { timingSafeEqual } from 'node:crypto'
import { compareIds, parseTime } from '@threadline/domain'
import { silentLogger, type Logger } from '@threadline/logger'
import { once, type Service } from '@threadline/runtime'
import {
  FIELD_PARAMS,
  InvalidRequestError,
  boolParam,
  idListParam,
  idParam,
  intParam,
  invalid,
  readParams,
} from './params.js'
import { RuleStore, queryCompiler, type RuleCompiler } from './rules.js'
import { IncludesBuilder, postJson, userJson, viewOf } from './serialize.js'
import { StreamHub, type Deliveries, type Faults, type Route } from './stream.js'
import { createWorld, type SimPost, type World, type WorldOptions } from './world.js'

export interface SimulatorOptions {
  host?: string
  /** 0 picks a free port (tests). */
  port?: number
  seed?: number
  /** New Posts per second; 0 makes Posts only on demand (`emit`, `reply`). */
  rate?: number
  /**
   * Live generation stops after this many Posts (benchmarks of a fixed number), and waits for a
   * stream connection before it starts; unset: never stops.
   */
  stopAfter?: number
  bearerToken?: string
  /** A bare `\r\n` after this long without a line (X: 20 s). */
  keepAliveMs?: number
  world?: Omit<WorldOptions, 'seed'>
  maxStreamConnections?: number
  /** Requests per endpoint per 15-minute window before 429s. */
  rateLimit?: number
  maxStreamBufferBytes?: number
  /** What a stream that cannot keep up gets: X's disconnect, or generation waits (benchmarks). */
  slowReader?: 'disconnect' | 'pause'
  /** Keep the ids of the Posts sent, up to recordLimit (end-to-end checks); off for benchmarks. */
  recordDeliveries?: boolean
  /** Ids the record of deliveries keeps, overall and per rule (default RECORD_LIMIT, a million). */
  recordLimit?: number
  /** Rule and search query compiler; the default is the query package's language. */
  compileRule?: RuleCompiler
  logger?: Logger
}

export interface SimulatorStats {
  generated: number
  worldSize: number
  streamConnections: number
  streamConnects: number
  rules: number
  /** What was written on streams: totals, ids in order, per rule. */
  sent: Deliveries
}

export interface Simulator extends Service {
  /** Base URL once started (`http://host:port`). */
  readonly url: string
  readonly world: World
  readonly rules: RuleStore
  readonly faults: Faults
  stats(): SimulatorStats
  resetSent(): void
  /** Makes `count` Posts now and streams those that match. */
  emit(count: number): SimPost[]
  /**
   * Makes `count` Posts at `atMs` (their ids and times are not older), renders them for the open
   * streams before writing any, then writes them as fast as each reader takes them: a benchmark's
   * load, with the upstream's own work outside the time it measures. Returns how many matched.
   */
  burst(count: number, atMs?: number): number
  /** Makes a reply in a conversation now and streams it. */
  reply(conversationId: string, parentId?: string): SimPost
  /** Conversations that keep getting replies (for demos). */
  demoConversations(): string[]
}

const WINDOW_MS = 15 * 60_000
const SEVEN_DAYS_MS = 7 * 86_400_000
const MAX_BODY = 1024 * 1024
const JSON_TYPE = 'application/json; charset=utf-8'

const problem = (status: number, title: string, detail: string, extra: object = {}) =>
  JSON.stringify({ title, type: 'about:blank', status, detail, ...extra })

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(body)
  }
}

export function createSimulator(options: SimulatorOptions = {}): Simulator {
  const logger = (options.logger ?? silentLogger()).child({ component: 'simulator' })
  const seed = options.seed ?? 42
  const rate = options.rate ?? 5
  const token = Buffer.from(options.bearerToken ?? 'simulator-token')
  const rateLimit = options.rateLimit ?? 100_000
  const maxConnections = options.maxStreamConnections ?? 1
  const world = createWorld({ seed, ...options.world })
  const compile =
    options.compileRule ??
    queryCompiler((post) => {
      const users = []
      for (const id of [post.author_id, post.in_reply_to_user_id]) {
        const user = id === undefined ? undefined : world.user(id)
        if (user) users.push(user.wire)
      }
      return { users }
    })
  const rules = new RuleStore(compile)
  const hub = new StreamHub({
    world,
    rules,
    logger,
    keepAliveMs: options.keepAliveMs ?? 20_000,
    maxBufferBytes: options.maxStreamBufferBytes ?? 16 * 1024 * 1024,
    slowReader: options.slowReader ?? 'disconnect',
    recordDeliveries: options.recordDeliveries ?? true,
    recordLimit: options.recordLimit,
  })
  let generated = 0
  let streamConnects = 0
  let url = ''
  const windows = new Map<string, { used: number; resetMs: number }>()

  function produce(posts: SimPost[]) {
    generated += posts.length
    hub.deliver(posts)
    return posts
  }

  function burst(count: number, atMs = Date.now()): number {
    const posts = world.generate(count, atMs)
    generated += posts.length
    const matched = hub.prepare(posts)
    hub.pump()
    return matched
  }

  // Live generation: a tick makes the Posts due since the last one, all in one batch.
  let timer: NodeJS.Timeout | undefined
  let baseMs = 0
  let madeSinceBase = 0
  let madeLive = 0
  function tick() {
    const now = Date.now()
    // A fixed-count run (stopAfter) makes its Posts for a reader: none are made while none listens.
    if (hub.blocked || (options.stopAfter !== undefined && hub.size === 0)) {
      // Generation waits for the reader; restart the schedule so it does not burst afterwards.
      baseMs = now
      madeSinceBase = 0
      return
    }
    const due = Math.floor(((now - baseMs) * rate) / 1000) - madeSinceBase
    if (due <= 0) return
    const left = (options.stopAfter ?? Infinity) - madeLive
    const count = Math.min(due, Math.max(1, Math.ceil(rate / 10)), left)
    if (count <= 0) {
      clearInterval(timer)
      return
    }
    madeSinceBase += count
    madeLive += count
    produce(world.generate(count, now))
    if (due > count * 4) {
      // Too far behind (a long pause of the event loop): drop the backlog instead of a burst.
      baseMs = now
      madeSinceBase = 0
    }
  }

  function limit(res: ServerResponse, key: string): boolean {
    const now = Date.now()
    let w = windows.get(key)
    if (!w || now >= w.resetMs) windows.set(key, (w = { used: 0, resetMs: now + WINDOW_MS }))
    w.used++
    res.setHeader('x-rate-limit-limit', String(rateLimit))
    res.setHeader('x-rate-limit-remaining', String(Math.max(0, rateLimit - w.used)))
    res.setHeader('x-rate-limit-reset', String(Math.ceil(w.resetMs / 1000)))
    return w.used <= rateLimit
  }

  function send(res: ServerResponse, status: number, body: string) {
    res.statusCode = status
    res.setHeader('content-type', JSON_TYPE)
    res.end(body)
  }

  function authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization ?? ''
    const m = /^Bearer (.+)$/.exec(header)
    if (!m) return false
    const given = Buffer.from(m[1]!)
    return given.length === token.length && timingSafeEqual(given, token)
  }

  async function readBody(req: IncomingMessage): Promise<unknown> {
    const type = req.headers['content-type'] ?? ''
    if (!type.toLowerCase().startsWith('application/json')) {
      // Drain so the connection can be reused.
      req.resume()
      throw new HttpError(
        400,
        JSON.stringify({
          errors: [{ message: 'Requests with bodies must have content-type of application/json.' }],
          title: 'Invalid Request',
          detail: 'One or more parameters to your request was invalid.',
          type: 'https://api.twitter.com/2/problems/invalid-request',
        }),
      )
    }
    const chunks: Buffer[] = []
    let size = 0
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length
      if (size > MAX_BODY)
        throw new HttpError(413, problem(413, 'Payload Too Large', 'Body too large'))
      chunks.push(chunk)
    }
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'))
    } catch {
      throw new HttpError(
        400,
        JSON.stringify({
          errors: [{ message: 'The request body is not valid JSON.' }],
          title: 'Invalid Request',
          detail: 'One or more parameters to your request was invalid.',
          type: 'https://api.twitter.com/2/problems/invalid-request',
        }),
      )
    }
  }

  const sentAt = () => new Date().toISOString()

  // ---- rules ------------------------------------------------------------------------------------

  function listRules(params: Map<string, string>): string {
    const ids = params.has('ids') ? new Set(idListParam(params, 'ids', 1000)) : undefined
    const max = intParam(params, 'max_results', 1000, 1, 1000)
    const offset = params.has('pagination_token') ? Number(params.get('pagination_token')) : 0
    if (!Number.isInteger(offset) || offset < 0) {
      throw invalid('pagination_token', params.get('pagination_token')!, 'Invalid pagination_token')
    }
    const all = rules.list().filter((r) => !ids || ids.has(r.id))
    const page = all.slice(offset, offset + max)
    const meta: Record<string, unknown> = { sent: sentAt(), result_count: page.length }
    if (offset + max < all.length) meta.next_token = String(offset + max)
    const data = page.map((r) => ({
      id: r.id,
      value: r.value,
      ...(r.tag !== undefined ? { tag: r.tag } : {}),
    }))
    return JSON.stringify(data.length > 0 ? { data, meta } : { meta })
  }

  async function changeRules(req: IncomingMessage, params: Map<string, string>) {
    const dryRun = boolParam(params, 'dry_run')
    const deleteAll = boolParam(params, 'delete_all')
    if (deleteAll) {
      const { deleted } = rules.delete(
        rules.list().map((r) => r.id),
        'ids',
        dryRun,
      )
      req.resume()
      return {
        status: 200,
        body: { meta: { sent: sentAt(), summary: { deleted: deleted.length, not_deleted: 0 } } },
      }
    }
    const body = (await readBody(req)) as Record<string, unknown> | null
    const bad = (message: string) =>
      new HttpError(
        400,
        JSON.stringify({
          errors: [{ message }],
          title: 'Invalid Request',
          detail: 'One or more parameters to your request was invalid.',
          type: 'https://api.twitter.com/2/problems/invalid-request',
        }),
      )
    if (!body || typeof body !== 'object' || 'add' in body === 'delete' in body) {
      throw bad('The request body must hold exactly one of `add` or `delete`.')
    }
    if ('add' in body) {
      const add = body.add
      if (
        !Array.isArray(add) ||
        add.length === 0 ||
        !add.every(
          (r) =>
            r &&
            typeof r === 'object' &&
            typeof r.value === 'string' &&
            (r.tag === undefined || typeof r.tag === 'string'),
        )
      ) {
        throw bad('`add` must be a non-empty array of {value, tag?} objects.')
      }
      const result = rules.add(add as { value: string; tag?: string }[], dryRun)
      const out: Record<string, unknown> = {}
      if (result.created.length > 0) {
        out.data = result.created.map((r) => ({
          value: r.value,
          ...(r.tag !== undefined ? { tag: r.tag } : {}),
          id: r.id,
        }))
      }
      out.meta = {
        sent: sentAt(),
        summary: {
          created: result.created.length,
          not_created: add.length - result.created.length,
          valid: add.length - result.invalid,
          invalid: result.invalid,
        },
      }
      if (result.errors.length > 0) out.errors = result.errors
      return { status: result.created.length > 0 ? 201 : 200, body: out }
    }
    const del = body.delete as { ids?: unknown; values?: unknown } | undefined
    const keys = del?.ids ?? del?.values
    if (!del || !Array.isArray(keys) || !keys.every((k) => typeof k === 'string')) {
      throw bad('`delete` must be {ids: [...]} or {values: [...]}.')
    }
    const by = del.ids !== undefined ? 'ids' : 'values'
    const { deleted, missing } = rules.delete(keys as string[], by, dryRun)
    const out: Record<string, unknown> = {
      meta: { sent: sentAt(), summary: { deleted: deleted.length, not_deleted: missing.length } },
    }
    if (missing.length > 0) {
      out.errors = missing.map((key) => ({
        errors: [
          {
            parameters: { [by]: [key] },
            message: `Rule ${by === 'ids' ? 'id' : 'value'} not found`,
          },
        ],
        title: 'Invalid Request',
        detail: 'One or more parameters to your request was invalid.',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      }))
    }
    return { status: 200, body: out }
  }

  // ---- search -----------------------------------------------------------------------------------

  const SEARCH_PARAMS = [
    'query',
    'max_results',
    'next_token',
    'pagination_token',
    'since_id',
    'until_id',
    'start_time',
    'end_time',
    'sort_order',
    ...FIELD_PARAMS,
  ]

  function queryCheck(query: string): string {
    let h = 2166136261
    for (let i = 0; i < query.length; i++) h = Math.imul(h ^ query.charCodeAt(i), 16777619)
    return (h >>> 0).toString(36)
  }

  function search(kind: 'recent' | 'all', params: Map<string, string>): string {
    const query = params.get('query')
    if (query === undefined || query.trim() === '') {
      throw invalid('query', query ?? '', 'The `query` query parameter can not be empty')
    }
    const max = intParam(params, 'max_results', 10, 10, kind === 'recent' ? 100 : 500)
    const sinceId = idParam(params, 'since_id')
    const untilId = idParam(params, 'until_id')
    const time = (name: string) => {
      const raw = params.get(name)
      if (raw === undefined) return undefined
      const t = parseTime(raw)
      if (!t)
        throw invalid(
          name,
          raw,
          `Invalid '${name}':'${raw}'. '${name}' must be a valid RFC 3339 time`,
        )
      return t.getTime()
    }
    const startMs = time('start_time')
    const endMs = time('end_time')
    const now = Date.now()
    const floorMs = kind === 'recent' ? now - SEVEN_DAYS_MS : 0
    if (startMs !== undefined && startMs < floorMs) {
      const bound = new Date(floorMs).toISOString().slice(0, 16) + 'Z'
      throw invalid(
        'start_time',
        params.get('start_time')!,
        `Invalid 'start_time':'${params.get('start_time')}'. 'start_time' must be on or after ${bound}`,
      )
    }
    const token = params.get('next_token') ?? params.get('pagination_token')
    let beforeId: string | undefined
    if (token !== undefined) {
      const [id, check] = Buffer.from(token, 'base64url').toString('utf8').split(':')
      if (!id || !/^\d{1,19}$/.test(id) || check !== queryCheck(query)) {
        const name = params.has('next_token') ? 'next_token' : 'pagination_token'
        throw invalid(name, token, `The \`${name}\` query parameter value [${token}] is not valid`)
      }
      beforeId = id
    }
    const compiled = compile(query)
    if (!compiled.ok) {
      throw invalid('query', query, `There were errors processing your request: ${compiled.reason}`)
    }
    const { conversationIds, test } = compiled.rule
    let candidates: Iterable<SimPost>
    if (conversationIds) {
      const lists = conversationIds.map((id) => world.conversation(id) ?? [])
      candidates =
        lists.length === 1
          ? reversed(lists[0]!)
          : lists.flat().sort((a, b) => compareIds(b.id, a.id))
    } else candidates = world.newestFirst()
    const lowMs = Math.max(floorMs, startMs ?? 0)
    const page: SimPost[] = []
    let more = false
    for (const post of candidates) {
      // Newest first: once below the lower bounds, nothing further can match.
      if (post.createdMs < lowMs) break
      if (sinceId !== undefined && compareIds(post.id, sinceId) <= 0) break
      if (beforeId !== undefined && compareIds(post.id, beforeId) >= 0) continue
      if (untilId !== undefined && compareIds(post.id, untilId) >= 0) continue
      if (endMs !== undefined && post.createdMs >= endMs) continue
      if (test && !test(post.wire)) continue
      if (page.length === max) {
        more = true
        break
      }
      page.push(post)
    }
    if (page.length === 0) return '{"meta":{"result_count":0}}'
    const view = viewOf(params)
    const includes = new IncludesBuilder(world, view)
    for (const post of page) includes.add(post)
    const meta: Record<string, unknown> = {
      newest_id: page[0]!.id,
      oldest_id: page[page.length - 1]!.id,
      result_count: page.length,
    }
    if (more) {
      meta.next_token = Buffer.from(`${page[page.length - 1]!.id}:${queryCheck(query)}`).toString(
        'base64url',
      )
    }
    return `{"data":[${page.map((p) => postJson(world, p, view)).join(',')}]${includes.suffix()},"meta":${JSON.stringify(meta)}}`
  }

  // ---- lookup -----------------------------------------------------------------------------------

  function lookup(ids: string[], params: Map<string, string>, single: boolean): string {
    const view = viewOf(params)
    const includes = new IncludesBuilder(world, view)
    const found: string[] = []
    const param = single ? 'id' : 'ids'
    for (const id of ids) {
      const post = world.get(id)
      if (!post) {
        includes.error({
          value: id,
          detail: `Could not find tweet with ${param}: [${id}].`,
          title: 'Not Found Error',
          resource_type: 'tweet',
          parameter: param,
          resource_id: id,
          type: 'https://api.twitter.com/2/problems/resource-not-found',
        })
        continue
      }
      found.push(postJson(world, post, view))
      includes.add(post)
    }
    const suffix = includes.suffix()
    if (found.length === 0) return `{${suffix.slice(1)}}`
    return `{"data":${single ? found[0] : `[${found.join(',')}]`}${suffix}}`
  }

  function lookupUsers(ids: string[], params: Map<string, string>, single: boolean): string {
    const view = viewOf(params)
    const found: string[] = []
    const errors: unknown[] = []
    const param = single ? 'id' : 'ids'
    for (const id of ids) {
      const user = world.user(id)
      if (user) found.push(userJson(user, view))
      else
        errors.push({
          value: id,
          detail: `Could not find user with ${param}: [${id}].`,
          title: 'Not Found Error',
          resource_type: 'user',
          parameter: param,
          resource_id: id,
          type: 'https://api.twitter.com/2/problems/resource-not-found',
        })
    }
    const errorsPart = errors.length > 0 ? `"errors":${JSON.stringify(errors)}` : ''
    if (found.length === 0) return `{${errorsPart}}`
    return `{"data":${single ? found[0] : `[${found.join(',')}]`}${errorsPart ? ',' + errorsPart : ''}}`
  }

  // ---- stream -----------------------------------------------------------------------------------

  function connect(res: ServerResponse, params: Map<string, string>) {
    const backfill = intParam(params, 'backfill_minutes', 0, 0, 5)
    for (const name of ['start_time', 'end_time']) {
      const raw = params.get(name)
      if (raw !== undefined && !parseTime(raw)) {
        throw invalid(
          name,
          raw,
          `Invalid '${name}':'${raw}'. '${name}' must be a valid RFC 3339 time`,
        )
      }
    }
    const view = viewOf(params)
    if (rules.size === 0) {
      return send(
        res,
        409,
        JSON.stringify({
          title: 'ConnectionException',
          detail:
            'You must define rules using the POST /2/tweets/search/stream/rules endpoint before connecting to filtered stream.',
          connection_issue: 'RuleConfigurationIssue',
          type: 'https://api.twitter.com/2/problems/streaming-connection',
        }),
      )
    }
    if (hub.size >= maxConnections) {
      return send(
        res,
        429,
        JSON.stringify({
          title: 'ConnectionException',
          detail: 'This stream is currently at the maximum allowed connection limit.',
          connection_issue: 'TooManyConnections',
          type: 'https://api.twitter.com/2/problems/streaming-connection',
        }),
      )
    }
    streamConnects++
    res.statusCode = 200
    res.setHeader('content-type', JSON_TYPE)
    res.socket?.setNoDelay(true)
    res.flushHeaders()
    const backlog = backfill > 0 ? world.since(Date.now() - backfill * 60_000) : []
    hub.open(res, view, backlog)
  }

  // ---- admin (faults and records over HTTP, for tests that run the simulator as a process) -------

  async function admin(
    req: IncomingMessage,
    path: string,
  ): Promise<{ status: number; body: unknown }> {
    const body =
      req.method === 'POST' ? (((await readBody(req)) as Record<string, unknown> | null) ?? {}) : {}
    const num = (name: string, fallback: number) => {
      const v = body[name]
      return typeof v === 'number' && Number.isFinite(v) ? v : fallback
    }
    switch (`${req.method} ${path}`) {
      case 'GET /_sim/stats': {
        // Counts only: the ids are GET /_sim/sent's (up to a million of them).
        const { ids: _ids, byRule, ...sent } = hub.sent()
        const rules = Object.fromEntries(
          Object.entries(byRule).map(([id, { ids: _ruleIds, ...r }]) => [id, r]),
        )
        return { status: 200, body: { ...statsSnapshot(), sent: { ...sent, byRule: rules } } }
      }
      case 'GET /_sim/sent':
        return { status: 200, body: hub.sent() }
      case 'POST /_sim/sent/reset':
        hub.resetSent()
        return { status: 200, body: { ok: true } }
      case 'GET /_sim/demo':
        return { status: 200, body: { conversation_ids: world.demoConversations() } }
      case 'POST /_sim/emit': {
        const conversationId = body.conversation_id
        if (typeof conversationId === 'string') {
          const parentId = typeof body.parent_id === 'string' ? body.parent_id : undefined
          return { status: 200, body: { ids: [sim.reply(conversationId, parentId).id] } }
        }
        return { status: 200, body: { ids: sim.emit(num('count', 1)).map((p) => p.id) } }
      }
      case 'POST /_sim/faults': {
        const f = hub.faults
        const count = num('count', 1)
        switch (body.fault) {
          case 'fail':
            f.failNext(count, {
              status: num('status', 429),
              route: (typeof body.route === 'string' ? body.route : 'stream') as Route,
              resetSeconds: num('reset_seconds', 1),
            })
            break
          case 'drop':
            return {
              status: 200,
              body: { dropped: f.dropStreams({ graceful: body.graceful === true }) },
            }
          case 'silence':
            f.silence(num('ms', 35_000))
            break
          case 'malformed':
            f.malformed(
              count,
              (body.kind as 'truncated' | 'not-json' | 'no-id' | undefined) ?? 'truncated',
            )
            break
          case 'duplicate':
            f.duplicateNext(count)
            break
          case 'reorder':
            f.reorderNext(count)
            break
          case 'reset':
            f.reset()
            break
          default:
            throw new HttpError(
              400,
              problem(400, 'Invalid Request', `unknown fault ${String(body.fault)}`),
            )
        }
        return { status: 200, body: { ok: true } }
      }
      default:
        throw new HttpError(404, problem(404, 'Not Found Error', 'Not Found'))
    }
  }

  // ---- routing ----------------------------------------------------------------------------------

  function routeOf(method: string, path: string): { route: Route; key: string } | undefined {
    if (path === '/2/tweets/search/stream/rules') return { route: 'rules', key: `rules:${method}` }
    if (path === '/2/tweets/search/stream' && method === 'GET')
      return { route: 'stream', key: 'stream' }
    if ((path === '/2/tweets/search/recent' || path === '/2/tweets/search/all') && method === 'GET')
      return { route: 'search', key: path }
    if ((path === '/2/tweets' || /^\/2\/tweets\/\d+$/.test(path)) && method === 'GET')
      return { route: 'lookup', key: 'lookup' }
    if ((path === '/2/users' || /^\/2\/users\/\d+$/.test(path)) && method === 'GET')
      return { route: 'users', key: 'users' }
    return undefined
  }

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const method = req.method ?? 'GET'
    const u = new URL(req.url ?? '/', 'http://simulator')
    const path = u.pathname.replace(/\/+$/, '') || '/'
    if (!authorized(req)) {
      req.resume()
      return send(res, 401, problem(401, 'Unauthorized', 'Unauthorized'))
    }
    if (path.startsWith('/_sim/')) {
      const { status, body } = await admin(req, path)
      return send(res, status, JSON.stringify(body))
    }
    const route = routeOf(method, path)
    if (!route) {
      req.resume()
      return send(res, 404, problem(404, 'Not Found Error', 'Not Found'))
    }
    const within = limit(res, route.key)
    const failure = hub.takeFailure(route.route)
    if (failure) {
      req.resume()
      if (failure.status === 429) {
        res.setHeader('x-rate-limit-remaining', '0')
        res.setHeader(
          'x-rate-limit-reset',
          String(Math.ceil(Date.now() / 1000) + failure.resetSeconds),
        )
        return send(res, 429, problem(429, 'Too Many Requests', 'Too Many Requests'))
      }
      return send(
        res,
        failure.status,
        problem(failure.status, 'Service Unavailable', 'Injected failure'),
      )
    }
    if (!within) {
      req.resume()
      return send(res, 429, problem(429, 'Too Many Requests', 'Too Many Requests'))
    }
    switch (route.route) {
      case 'rules': {
        if (method === 'GET') {
          return send(
            res,
            200,
            listRules(readParams(u.searchParams, ['ids', 'max_results', 'pagination_token'])),
          )
        }
        if (method !== 'POST') {
          req.resume()
          return send(res, 404, problem(404, 'Not Found Error', 'Not Found'))
        }
        const { status, body } = await changeRules(
          req,
          readParams(u.searchParams, ['dry_run', 'delete_all']),
        )
        return send(res, status, JSON.stringify(body))
      }
      case 'stream':
        return connect(
          res,
          readParams(u.searchParams, [
            'backfill_minutes',
            'start_time',
            'end_time',
            ...FIELD_PARAMS,
          ]),
        )
      case 'search':
        return send(
          res,
          200,
          search(
            path.endsWith('/recent') ? 'recent' : 'all',
            readParams(u.searchParams, SEARCH_PARAMS),
          ),
        )
      case 'lookup': {
        const single = path !== '/2/tweets'
        const params = readParams(u.searchParams, single ? FIELD_PARAMS : ['ids', ...FIELD_PARAMS])
        const ids = single ? [path.slice('/2/tweets/'.length)] : idListParam(params, 'ids', 100)
        return send(res, 200, lookup(ids, params, single))
      }
      case 'users': {
        const single = path !== '/2/users'
        const allowed = ['user.fields', 'tweet.fields', 'expansions']
        const params = readParams(u.searchParams, single ? allowed : ['ids', ...allowed])
        const ids = single ? [path.slice('/2/users/'.length)] : idListParam(params, 'ids', 100)
        return send(res, 200, lookupUsers(ids, params, single))
      }
      default:
        return send(res, 404, problem(404, 'Not Found Error', 'Not Found'))
    }
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (res.headersSent) {
        res.destroy()
        return
      }
      if (err instanceof InvalidRequestError) {
        return send(
          res,
          400,
          JSON.stringify({
            errors: err.errors,
            title: 'Invalid Request',
            detail: 'One or more parameters to your request was invalid.',
            type: 'https://api.twitter.com/2/problems/invalid-request',
          }),
        )
      }
      if (err instanceof HttpError) return send(res, err.status, err.body)
      logger.error({ err }, 'request failed')
      send(res, 500, problem(500, 'Internal Server Error', 'Internal Server Error'))
    })
  })

  function statsSnapshot(): SimulatorStats {
    return {
      generated,
      worldSize: world.size,
      streamConnections: hub.size,
      streamConnects,
      rules: rules.size,
      sent: hub.sent(),
    }
  }

  const sim: Simulator = {
    get url() {
      return url
    },
    world,
    rules,
    faults: hub.faults,
    stats: statsSnapshot,
    resetSent: () => hub.resetSent(),
    emit: (count) => produce(world.generate(count)),
    burst,
    reply: (conversationId, parentId) =>
      produce([world.addReply(conversationId, parentId !== undefined ? { parentId } : {})])[0]!,
    demoConversations: () => world.demoConversations(),
    async start() {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject)
        server.listen(options.port ?? 3100, options.host ?? '127.0.0.1', () => {
          server.off('error', reject)
          resolve()
        })
      })
      const address = server.address() as AddressInfo
      const host = address.family === 'IPv6' ? `[${address.address}]` : address.address
      url = `http://${host}:${address.port}`
      if (rate > 0) {
        baseMs = Date.now()
        madeSinceBase = 0
        timer = setInterval(tick, rate >= 100 ? 10 : Math.min(100, Math.max(10, 1000 / rate)))
      }
      logger.info({ url, seed, rate, posts: world.size }, 'simulator listening')
    },
    close: once(async () => {
      clearInterval(timer)
      // Streams first: a server with open long-lived responses never finishes closing.
      await hub.closeAll()
      if (!server.listening) return
      const closed = new Promise<void>((resolve) => server.close(() => resolve()))
      server.closeAllConnections()
      await closed
    }),
  }
  return sim
}

function* reversed<T>(items: readonly T[]): Iterable<T> {
  for (let i = items.length - 1; i >= 0; i--) yield items[i]!
}
