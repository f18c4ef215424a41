import type { FastifyInstance } from 'fastify'
import type { Db } from '@threadline/db'
import { selection } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import { createConnectionSlots, type ConnectionSlots, type Redis } from '@threadline/redis'
import { withDeadline } from '@threadline/runtime'
import { ApiError, PROBLEM_BASE, serviceUnavailable } from '../errors.js'
import { parseParams, queryEntries } from '../params.js'
import { STREAM_PARAMS } from '../specs.js'
import { StreamRegistry } from './connection.js'
import { StreamHub, type StreamHubOptions } from './hub.js'

export interface FilteredStreamOptions extends StreamHubOptions {
  /** A bare `\r\n` after this long without traffic. */
  keepAliveMs: number
  /** Open filtered-stream connections per app (X: 1). */
  maxConnectionsPerApp: number
  /** Per-connection send buffer (bytes) past which the reader is cut off as SlowReader. */
  maxBufferedBytes: number
  /**
   * `cluster` (default): the connection limit is counted in Redis across every API instance, as a
   * client sees one service whichever instance it reaches. `instance`: counted per process.
   */
  connectionScope?: 'cluster' | 'instance'
}

export interface FilteredStream {
  hub: StreamHub
  registry: StreamRegistry
  /** Resolves once the hub is ready; throws the 503 when it does not get ready in time. */
  whenHubReady(): Promise<void>
}

/**
 * How long a stream request made before the hub is ready (a server just started, or Redis down since
 * the start) waits for it before the 503.
 */
const HUB_WAIT_MS = 2_000

/** 409 when the app has no rules (X's body). */
export function noRulesError(): ApiError {
  return new ApiError(409, {
    title: 'ConnectionException',
    detail:
      'You must define rules using the POST /2/tweets/search/stream/rules endpoint before connecting to filtered stream.',
    connection_issue: 'RuleConfigurationIssue',
    type: `${PROBLEM_BASE}streaming-connection`,
  })
}

/**
 * `GET /2/tweets/search/stream` (docs/api.md §3.3) on a server not yet ready: the route, the hub (started
 * by `onReady`, stopped by `onClose`) and the preClose hook that sends every open stream the
 * OperationalDisconnect line (without it app.close() would wait for them forever).
 */
export function registerFilteredStream(
  app: FastifyInstance,
  deps: {
    db: Db
    redis: Redis
    logger: Logger
    options: FilteredStreamOptions
  },
): FilteredStream {
  const { options } = deps
  const hub = new StreamHub(deps)
  const log = deps.logger.child({ component: 'filtered-stream' })
  let slots: ConnectionSlots | undefined
  if ((options.connectionScope ?? 'cluster') === 'cluster') {
    slots = createConnectionSlots(deps.redis, { prefix: options.prefix, logger: deps.logger })
  }
  const registry = new StreamRegistry({
    kind: 'search-stream',
    maxPerApp: options.maxConnectionsPerApp,
    keepAliveMs: options.keepAliveMs,
    maxBufferedBytes: options.maxBufferedBytes,
    slots,
    logger: deps.logger,
  })

  // Started as the server starts, in the background: the hub waits for Redis (the stored stream's
  // tail) and Postgres (LISTEN), and the rest of the API (lookups, search, rules) must not wait with
  // it. Until it is ready this route waits a little, then answers 503; onClose ends the wait.
  let hubReady = false
  let hubStarting: Promise<void> = Promise.resolve()
  app.addHook('onReady', async () => {
    hubStarting = hub.start().then(
      () => void (hubReady = true),
      (err: unknown) => log.error({ err }, 'the filtered stream could not start'),
    )
  })
  const whenHubReady = async (): Promise<void> => {
    if (hubReady) return
    await withDeadline(HUB_WAIT_MS, 'the stream hub', () => hubStarting).catch(() => {})
    if (!hubReady) {
      log.warn('filtered stream refused: its hub is not connected to Redis and Postgres yet')
      throw serviceUnavailable()
    }
  }
  app.addHook('preClose', async () => {
    await registry.closeAll()
  })
  app.addHook('onClose', async () => {
    slots?.close()
    await hub.close()
  })

  app.route({
    method: 'GET',
    url: '/2/tweets/search/stream',
    config: {
      endpoint: {
        name: 'search-stream',
        // Its own window (by name), with the rules endpoints' limit per 15 minutes.
        group: 'rules',
        params: STREAM_PARAMS,
        summary: 'Filtered stream of the Posts matching the app’s rules',
      },
    },
    handler: async (request, reply) => {
      const p = parseParams(STREAM_PARAMS, queryEntries(request.url))
      const sel = selection(
        (p['tweet.fields'] as string[] | undefined) ?? [],
        (p.expansions as string[] | undefined) ?? [],
        (p['user.fields'] as string[] | undefined) ?? [],
      )
      const appId = request.client!.app_id
      await whenHubReady()
      const lease = await hub.retainApp(appId)
      let conn
      try {
        if (lease.ruleCount === 0) throw noRulesError()
        conn = await registry.open(reply, appId)
      } catch (err) {
        lease.release()
        throw err
      }
      conn.onClose(() => lease.release())
      hub.attach(conn, sel, (p.backfill_minutes as number | undefined) ?? 0)
      return reply
    },
  })

  return { hub, registry, whenHubReady }
}
