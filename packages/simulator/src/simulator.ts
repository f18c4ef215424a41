import { createServer } from 'node:http'
import { silentLogger, type Logger } from '@threadline/logger'
import { once, type Service } from '@threadline/runtime'
import { RuleStore, queryCompiler, type RuleCompiler } from './rules.js'
import { ComplianceJobs, type ComplianceJobFaults } from './compliance-jobs.js'
import { ComplianceHub } from './compliance-stream.js'
import { StreamFeed } from './feed.js'
import { LiveGeneration } from './live.js'
import { RateLimits } from './rate-limit.js'
import type { AdminDeps } from './routes/admin.js'
import { createRouter } from './routes/router.js'
import { closeServer, listen } from './server.js'
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

export function createSimulator(options: SimulatorOptions = {}): Simulator {
  const logger = (options.logger ?? silentLogger()).child({ component: 'simulator' })
  const seed = options.seed ?? 42
  const rate = options.rate ?? 5
  const world = createWorld({ seed, ...options.world })
  const compile = options.compileRule ?? worldCompiler(world)
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
  const feed = new StreamFeed(world, hub)
  let streamConnects = 0
  let url = ''
  const emit = (count: number) => feed.emit(count)
  const reply = (conversationId: string, parentId?: string) => feed.reply(conversationId, parentId)
  const stats = (): SimulatorStats => ({
    generated: feed.generated,
    worldSize: world.size,
    streamConnections: hub.size,
    streamConnects,
    rules: rules.size,
    sent: hub.sent(),
  })

  const live = new LiveGeneration(
    {
      hub,
      make: (count, atMs) => void feed.emit(count, atMs),
      withdraw: () => withdrawals.step(),
    },
    { rate, stopAfter: options.stopAfter, withdrawalsPerMinute: options.withdrawalsPerMinute ?? 0 },
  )
  const ctx: AdminDeps = {
    world,
    rules,
    hub,
    compile,
    maxConnections: options.maxStreamConnections ?? 1,
    grantBackfill: options.grantBackfill ?? true,
    connected: () => void streamConnects++,
    withdrawals,
    compliance: complianceHub,
    jobs,
    stats,
    emit,
    reply,
  }
  const server = createServer(
    createRouter({
      ctx,
      token: Buffer.from(options.bearerToken ?? 'simulator-token'),
      limits: new RateLimits(options.rateLimit ?? 100_000),
      logger,
    }),
  )

  return {
    get url() {
      return url
    },
    world,
    rules,
    faults: hub.faults,
    compliance: complianceView(withdrawals, complianceHub, jobs),
    stats,
    resetSent: () => hub.resetSent(),
    emit,
    burst: (count, atMs) => feed.burst(count, atMs),
    reply,
    demoConversations: () => world.demoConversations(),
    async start() {
      url = await listen(server, options.port ?? 3100, options.host ?? '127.0.0.1')
      live.start()
      logger.info({ url, seed, rate, posts: world.size }, 'simulator listening')
    },
    close: once(async () => {
      live.stop()
      complianceHub.close()
      // Streams first: a server with open long-lived responses never finishes closing.
      await hub.closeAll()
      await closeServer(server)
    }),
  }
}

/** The query language's compiler, with the users a Post names (author, replied-to) from the world. */
function worldCompiler(world: World): RuleCompiler {
  return queryCompiler((post) => {
    const users = []
    for (const id of [post.author_id, post.in_reply_to_user_id]) {
      const user = id === undefined ? undefined : world.user(id)
      if (user) users.push(user.wire)
    }
    return { users }
  })
}

/** The upstream's compliance side as the Simulator shows it. */
function complianceView(
  withdrawals: Withdrawals,
  hub: ComplianceHub,
  jobs: ComplianceJobs,
): SimulatorCompliance {
  return {
    withdrawals,
    jobFaults: jobs.faults,
    dropStreams: () => hub.drop(),
    stats: () => ({
      events: withdrawals.size,
      streams: hub.size,
      sent: { ...hub.sent },
      jobsCreated: jobs.created,
      jobsUploaded: jobs.uploaded,
    }),
  }
}
