import type { Config } from '@threadline/config'
import { addRules, createDb, demoApp, sql } from '@threadline/db'
import {
  apiDepsFromConfig,
  apiOptionsFromConfig,
  createApi,
  withApiOverrides,
  type ApiOverrides,
} from '@threadline/api'
import {
  createDelivery,
  deliveryDepsFromConfig,
  deliveryOptionsFromConfig,
  type DeliveryOptions,
} from '@threadline/delivery'
import {
  complianceOptionsFromConfig,
  createIngest,
  ingestDepsFromConfig,
  ingestOptionsFromConfig,
  type IngestOptions,
} from '@threadline/ingest'
import type { Logger } from '@threadline/logger'
import {
  createProcessMetrics,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
  type Metrics,
  type ProcessMetricsOptions,
} from '@threadline/metrics'
import { createQueue } from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import { runUntilSignal, type Service } from '@threadline/runtime'
import {
  createSimulator,
  simulatorOptionsFromConfig,
  withSimulatorOverrides,
  type Simulator,
  type SimulatorOverrides,
} from '@threadline/simulator'
import type { WriterOptions } from '@threadline/writer'
import { err, UsageError } from '../output.js'
import type { Terminal } from '../terminal.js'
import { composeWriter } from '../writer.js'
import { migrate } from './migrate.js'

/**
 * What tests may change besides configuration, per role: internal timings and sizes that are
 * constants in production (a writer's job lock, the ingest's reconnect steps, …).
 */
export interface RoleTuning {
  api?: ApiOverrides
  ingest?: Partial<IngestOptions>
  writer?: Partial<WriterOptions>
  delivery?: Partial<DeliveryOptions>
  simulator?: SimulatorOverrides
  metrics?: Partial<ProcessMetricsOptions>
}

/** What a role needs besides configuration: the built-in simulator's URL, when one runs. */
interface RoleContext {
  simulator?: Simulator
  /** The process's one metrics registry, shared by every role it runs. */
  metrics?: Metrics
  tuning: RoleTuning
}

type RoleFactory = (config: Config, logger: Logger, ctx: RoleContext) => Promise<Service>

/** Every role `threadline start` can run; one codebase, several deployables. */
export const ROLES: Record<string, RoleFactory> = {
  api: async (config, logger, ctx) =>
    createApi(
      await apiDepsFromConfig(config, logger.child({ role: 'api' }), ctx.metrics),
      withApiOverrides(apiOptionsFromConfig(config), ctx.tuning.api ?? {}),
    ),
  ingest: async (config, logger, ctx) => {
    // Without UPSTREAM_URL the built-in simulator is the upstream.
    const upstream = ctx.simulator
      ? {
          ...config,
          UPSTREAM_URL: ctx.simulator.url,
          UPSTREAM_BEARER_TOKEN: config.SIMULATOR_BEARER_TOKEN,
        }
      : config
    const options = { ...ingestOptionsFromConfig(upstream), ...ctx.tuning.ingest }
    return createIngest(
      await ingestDepsFromConfig(upstream, logger.child({ role: 'ingest' }), ctx.metrics),
      options,
    )
  },
  writer: (config, logger, ctx) =>
    composeWriter(config, logger.child({ role: 'writer' }), ctx.metrics, ctx.tuning.writer),
  delivery: async (config, logger, ctx) =>
    createDelivery(
      await deliveryDepsFromConfig(config, logger.child({ role: 'delivery' }), ctx.metrics),
      { ...deliveryOptionsFromConfig(config), ...ctx.tuning.delivery },
    ),
}

/** A listening address people can open: 0.0.0.0 and :: listen everywhere, so name this machine. */
function viewerHost(host: string): string {
  if (host === '0.0.0.0' || host === '::' || host === '') return '127.0.0.1'
  return host.includes(':') ? `[${host}]` : host
}

export function parseRoles(value: string | undefined): string[] {
  const roles = value
    ? value
        .split(',')
        .map((r) => r.trim())
        .filter(Boolean)
    : Object.keys(ROLES)
  const unknown = roles.filter((r) => !(r in ROLES))
  if (unknown.length > 0) {
    throw new UsageError(
      `unknown role(s) ${unknown.join(', ')}; roles: ${Object.keys(ROLES).join(', ')}`,
    )
  }
  return roles
}

/** How often the demo reports progress: a status line redrawn on a terminal, a JSON log line off it. */
const PROGRESS_MS = 1_000

/**
 * The demo of `pnpm start`: a demo app with a fresh token (printed), rules for the simulator's live
 * demo conversations, a link to the viewer (docs/api.md §6) with the token in its fragment, and
 * progress each second.
 */
function demo(
  config: Config,
  logger: Logger,
  simulator: Simulator | undefined,
  terminal: Terminal | undefined,
): Service {
  const db = createDb({ url: config.DATABASE_URL, poolMax: 2, applicationName: 'threadline-demo' })
  const redis = createRedis(config, 'producer', 'demo')
  const queue = createQueue('posts', { connection: redis, prefix: config.REDIS_PREFIX, logger })
  let timer: NodeJS.Timeout | undefined
  return {
    async start() {
      const app = await demoApp(db, 'demo')
      const conversations = simulator?.demoConversations() ?? []
      await addRules(
        db,
        app.app_id,
        conversations.map((id) => ({ value: `conversation_id:${id}`, tag: 'demo' })),
        { cap: 1000 },
      )
      const base = `http://${viewerHost(config.HOST)}:${config.PORT}`
      // The token rides in the fragment, which the browser never sends (docs/api.md §6).
      const viewer = conversations[0] ? `/threads/${conversations[0]}` : '/threads'
      const banner = [
        '',
        `Threadline is running. Demo app ${app.app_id}; its bearer token (new each start):`,
        `  export TOKEN=${app.bearer_token}`,
        `Read a live conversation in the browser:`,
        `  ${base}${viewer}#token=${app.bearer_token}`,
        `Following ${conversations.length} live conversation(s) of the simulator. Try:`,
        ...conversations
          .slice(0, 1)
          .map(
            (id) =>
              `  curl -H "Authorization: Bearer $TOKEN" '${base}/2/tweets/search/recent?query=conversation_id:${id}&tweet.fields=created_at,conversation_id'`,
          ),
        `  curl -N -H "Authorization: Bearer $TOKEN" '${base}/2/tweets/search/stream'`,
        '',
      ].join('\n')
      if (terminal) terminal.print(banner)
      else err(banner)
      let previous: { posts: number; at: number } | undefined
      const tick = async () => {
        const { rows } = await sql<{ posts: string; conversations: string }>`
          SELECT (SELECT count(*) FROM posts) AS posts, (SELECT count(*) FROM conversations) AS conversations`.execute(
          db,
        )
        const waiting = await queue.getWaitingCount()
        const posts = Number(rows[0]!.posts)
        const conversationCount = Number(rows[0]!.conversations)
        if (!terminal) {
          logger.info({ posts, conversations: conversationCount, queued: waiting }, 'progress')
          return
        }
        const now = Date.now()
        const rate = previous ? ((posts - previous.posts) * 1000) / (now - previous.at) : 0
        previous = { posts, at: now }
        terminal.status(
          `● ${new Date(now).toISOString().slice(11, 19)}  ${posts.toLocaleString('en')} Posts` +
            ` (+${Math.max(0, Math.round(rate))}/s) in ${conversationCount.toLocaleString('en')}` +
            ` conversations · ${waiting} queued`,
        )
      }
      timer = setInterval(
        () =>
          void tick().catch((error: unknown) =>
            logger.warn({ err: error }, 'progress query failed'),
          ),
        PROGRESS_MS,
      )
    },
    async close() {
      clearInterval(timer)
      terminal?.clear()
      await queue.close()
      await closeRedis(redis)
      await db.destroy()
    },
  }
}

/** Withdrawals in the demo's simulator: one every 15 s, so a deletion reaches the viewer soon. */
const DEMO_WITHDRAWALS_PER_MINUTE = 4

/**
 * The demo's world withdraws Posts and users as it goes, and against the built-in simulator (an
 * upstream with X's compliance streams) the ingest reads them from its compliance streams, so a
 * deletion shows within seconds rather than at the next sweep (docs/architecture.md, "Compliance").
 */
function demoTuning(config: Config, tuning: RoleTuning): RoleTuning {
  const simulator = { withdrawalsPerMinute: DEMO_WITHDRAWALS_PER_MINUTE, ...tuning.simulator }
  if (config.UPSTREAM_URL || config.UPSTREAM_COMPLIANCE === 'off') return { ...tuning, simulator }
  const compliance = { ...complianceOptionsFromConfig(config), mode: 'stream' as const }
  return { ...tuning, simulator, ingest: { compliance, ...tuning.ingest } }
}

/**
 * `threadline start [--roles …] [--migrate] [--simulate] [--demo]`: runs the given roles in this
 * process until a signal. With the ingest and no UPSTREAM_URL (or with --simulate) it also runs the
 * simulator and points the ingest at it.
 */
export async function start(
  config: Config,
  logger: Logger,
  options: { roles: string[]; migrate: boolean; simulate: boolean; demo: boolean },
  givenTuning: RoleTuning = {},
  terminal?: Terminal,
): Promise<void> {
  const tuning = options.demo ? demoTuning(config, givenTuning) : givenTuning
  if (options.migrate || options.demo) await migrate(config)
  // First in, last out: /metrics answers while the roles start and stop (METRICS_PORT=0: off).
  const processMetrics = createProcessMetrics(metricsDepsFromConfig(config, logger), {
    ...metricsOptionsFromConfig(config, options.roles),
    ...tuning.metrics,
  })
  const services: Service[] = [processMetrics]
  const ctx: RoleContext = { metrics: processMetrics.metrics, tuning }
  const needsSimulator =
    options.simulate || (options.roles.includes('ingest') && !config.UPSTREAM_URL)
  if (needsSimulator) {
    ctx.simulator = createSimulator({
      ...withSimulatorOverrides(simulatorOptionsFromConfig(config), tuning.simulator ?? {}),
      logger: logger.child({ role: 'simulator' }),
    })
    // The simulator must listen before the ingest connects to it.
    await ctx.simulator.start()
    services.push({ start: async () => {}, close: () => ctx.simulator!.close() })
  }
  try {
    for (const role of options.roles) services.push(await ROLES[role]!(config, logger, ctx))
  } catch (error) {
    for (const s of services.reverse()) await s.close()
    throw error
  }
  if (options.demo) {
    services.push(demo(config, logger.child({ role: 'demo' }), ctx.simulator, terminal))
  }
  logger.info({ roles: options.roles, simulator: ctx.simulator?.url }, 'threadline starting')
  await runUntilSignal(services, logger, config.SHUTDOWN_TIMEOUT_MS)
}
