import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { timingSafeEqual } from 'node:crypto'
import { silentLogger, type Logger } from '@threadline/logger'
import { once, type Service } from '@threadline/runtime'
import { InvalidRequestError } from './params.js'
import { RuleStore, queryCompiler, type RuleCompiler } from './rules.js'
import { ComplianceJobs, type ComplianceJobFaults } from './compliance-jobs.js'
import { ComplianceHub } from './compliance-stream.js'
import { admin } from './routes/admin.js'
import { complianceJobRoutes } from './routes/compliance-jobs.js'
import { complianceStreamRoutes } from './routes/compliance-stream.js'
import { complianceTransfer } from './routes/compliance-transfer.js'
import { lookupRoutes } from './routes/lookup.js'
import { HttpError, problem, send, type SimContext, type SimRoute } from './routes/route.js'
import { rulesRoutes } from './routes/rules.js'
import { searchRoutes } from './routes/search.js'
import { streamRoutes } from './routes/stream.js'
import { StreamHub, type Deliveries, type Faults } from './stream.js'
import { createWorld, type SimPost, type World, type WorldOptions } from './world.js'
import { createWithdrawals, type Withdrawals } from './world-withdrawals.js'

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
  /** False: `backfill_minutes` is refused with X's 400, as for most access levels (default true). */
  grantBackfill?: boolean
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
  /** Withdrawals (deletes, protects, …) the world makes per minute on its own; 0: only on demand. */
  withdrawalsPerMinute?: number
  /** How long an uploaded batch compliance job stays `in_progress` (default 1 s). */
  complianceJobMs?: number
  logger?: Logger
}

/** The upstream's compliance side: the world's withdrawals, its streams and batch jobs. */
export interface SimulatorCompliance {
  readonly withdrawals: Withdrawals
  readonly jobFaults: ComplianceJobFaults
  /** Ends every open compliance stream abruptly; returns how many. */
  dropStreams(): number
  stats(): {
    events: number
    streams: number
    sent: { tweet: number; user: number }
    jobsCreated: number
    jobsUploaded: number
  }
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
  readonly compliance: SimulatorCompliance
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
  const withdrawals = createWithdrawals(world, seed)
  const keepAliveMs = options.keepAliveMs ?? 20_000
  const complianceHub = new ComplianceHub(withdrawals, keepAliveMs)
  const jobs = new ComplianceJobs(withdrawals, options.complianceJobMs ?? 1_000)
  const hub = new StreamHub({
    world,
    rules,
    logger,
    keepAliveMs,
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
  let withdrawalTimer: NodeJS.Timeout | undefined
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

  function authorized(req: IncomingMessage): boolean {
    const header = req.headers.authorization ?? ''
    const m = /^Bearer (.+)$/.exec(header)
    if (!m) return false
    const given = Buffer.from(m[1]!)
    return given.length === token.length && timingSafeEqual(given, token)
  }

  const ctx: SimContext = {
    world,
    rules,
    hub,
    compile,
    maxConnections,
    grantBackfill: options.grantBackfill ?? true,
    connected: () => void streamConnects++,
    withdrawals,
    compliance: complianceHub,
    jobs,
  }
  const routes: SimRoute[] = [
    ...rulesRoutes(ctx),
    ...streamRoutes(ctx),
    ...searchRoutes(ctx),
    ...lookupRoutes(ctx),
    ...complianceStreamRoutes(ctx),
    ...complianceJobRoutes(ctx),
  ]
  const routeOf = (method: string, path: string) =>
    routes.find(
      (r) =>
        r.method === method && (typeof r.path === 'string' ? r.path === path : r.path.test(path)),
    )

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const method = req.method ?? 'GET'
    const u = new URL(req.url ?? '/', 'http://simulator')
    const path = u.pathname.replace(/\/+$/, '') || '/'
    // Signed transfer URLs of batch compliance jobs: no bearer token, as on X.
    if (await complianceTransfer(jobs, req, res, path, u.searchParams)) return
    if (!authorized(req)) {
      req.resume()
      return send(res, 401, problem(401, 'Unauthorized', 'Unauthorized'))
    }
    if (path.startsWith('/_sim/')) {
      const { status, body } = await admin(
        { ...ctx, stats: statsSnapshot, emit: sim.emit, reply: sim.reply },
        req,
        path,
      )
      return send(res, status, JSON.stringify(body))
    }
    const route = routeOf(method, path)
    if (!route) {
      req.resume()
      return send(res, 404, problem(404, 'Not Found Error', 'Not Found'))
    }
    const within = limit(res, route.window)
    const failure = hub.takeFailure(route.fault)
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
    const answer = await route.run(req, res, path, u.searchParams)
    if (answer) send(res, answer.status, answer.body)
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
    compliance: {
      withdrawals,
      jobFaults: jobs.faults,
      dropStreams: () => complianceHub.drop(),
      stats: () => ({
        events: withdrawals.size,
        streams: complianceHub.size,
        sent: { ...complianceHub.sent },
        jobsCreated: jobs.created,
        jobsUploaded: jobs.uploaded,
      }),
    },
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
      const perMinute = options.withdrawalsPerMinute ?? 0
      if (perMinute > 0) {
        withdrawalTimer = setInterval(() => withdrawals.step(), 60_000 / perMinute)
      }
      logger.info({ url, seed, rate, posts: world.size }, 'simulator listening')
    },
    close: once(async () => {
      clearInterval(timer)
      clearInterval(withdrawalTimer)
      complianceHub.close()
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
