import type { FastifyInstance } from 'fastify'
import { complianceLogPage, complianceLogSeqBefore } from '@threadline/db'
import { complianceStreamBody } from '@threadline/domain'
import { createConnectionSlots, type Redis } from '@threadline/redis'
import { InvalidRequestError } from '../errors.js'
import {
  ComplianceLogPoller,
  isAfterSeq,
  type LogKind,
  type LoggedEvent,
} from '../compliance/log-poller.js'
import { compliancePartition } from '../compliance/partition.js'
import type { EndpointParams } from '../params.js'
import { StreamRegistry, type StreamConnection } from '../stream/connection.js'
import type { ComplianceApiOptions, ServerContext } from '../types.js'
import { addRoute, rawParam, type Endpoint, type RouteContext } from './route.js'

const COMPLIANCE_STREAM_PARAMS = {
  partition: { kind: 'int', min: 1, max: 4, required: true, description: 'The partition (1–4)' },
  backfill_minutes: { kind: 'int', min: 0, max: 5, description: 'Replay the last N minutes first' },
  start_time: { kind: 'time', description: 'Replay the log from this time (event_at)' },
  end_time: { kind: 'time', description: 'Replay up to this time (event_at), then end' },
} as const satisfies EndpointParams

export const TWEETS_COMPLIANCE_STREAM = {
  method: 'GET',
  url: '/2/tweets/compliance/stream',
  name: 'tweets-compliance-stream',
  group: 'rules',
  params: COMPLIANCE_STREAM_PARAMS,
  summary: 'Every compliance event Threadline applied to Posts, in X’s shapes',
} as const satisfies Endpoint<typeof COMPLIANCE_STREAM_PARAMS>

export const USERS_COMPLIANCE_STREAM = {
  method: 'GET',
  url: '/2/users/compliance/stream',
  name: 'users-compliance-stream',
  group: 'rules',
  params: COMPLIANCE_STREAM_PARAMS,
  summary: 'Every compliance event Threadline applied to users, in X’s shapes',
} as const satisfies Endpoint<typeof COMPLIANCE_STREAM_PARAMS>

/** Log events read per query of a replay. */
const REPLAY_PAGE = 1_000

/**
 * `GET /2/tweets/compliance/stream` and `GET /2/users/compliance/stream` (docs/api.md §8.2): the
 * compliance log replayed from `start_time` (or the last `backfill_minutes`), then every event as
 * it is applied, each on the partition its target's id hashes to. The framing, keep-alives, slow
 * readers and shutdown are the filtered stream's (stream/connection.ts).
 */
export function registerComplianceStreamRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  deps: { redis: Redis; prefix: string; options: ComplianceApiOptions },
): void {
  const { db, log } = ctx
  const poller = new ComplianceLogPoller(db, log, deps.options.logPollMs)
  const slots = createConnectionSlots(deps.redis, { prefix: deps.prefix, logger: log })
  const registries = new Map<string, StreamRegistry>()
  const registry = (kind: LogKind, partition: number) => {
    const key = `${kind}-compliance-${partition}`
    let r = registries.get(key)
    if (!r) {
      r = new StreamRegistry({
        kind: key,
        maxPerApp: deps.options.streamMaxConnections,
        keepAliveMs: deps.options.keepAliveMs,
        maxBufferedBytes: deps.options.maxBufferedBytes,
        slots,
        logger: log,
      })
      registries.set(key, r)
    }
    return r
  }
  app.addHook('preClose', async () => {
    await Promise.all([...registries.values()].map((r) => r.closeAll()))
  })
  app.addHook('onClose', async () => {
    slots.close()
    await poller.close()
  })

  const serve =
    (kind: LogKind) =>
    async (c: RouteContext<typeof COMPLIANCE_STREAM_PARAMS>): Promise<undefined> => {
      const { partition, start_time: start, end_time: end } = c.params
      const now = ctx.now()
      if (start && end && start >= end) {
        throw new InvalidRequestError([
          {
            parameters: { start_time: [rawParam(c.request, 'start_time')] },
            message: `The \`start_time\` query parameter value [${rawParam(c.request, 'start_time')}] must be before the \`end_time\` query parameter value [${rawParam(c.request, 'end_time')}]`,
          },
        ])
      }
      const backfill = c.params.backfill_minutes ?? 0
      const conn = await registry(kind, partition).open(c.reply, c.client.app_id)
      const mine = (e: { id: string; eventAt: string }) =>
        compliancePartition(e.id) === partition && (!end || new Date(e.eventAt) <= end)
      const send = (e: LoggedEvent) => conn.send(complianceStreamBody(e))

      // Live events wait here while the replay runs; null once live.
      let pending: LoggedEvent[] | null = []
      // What a replay sent above the poller's settled mark: the poller may still read those (a
      // late commit), and they are not sent twice.
      const replayed = new Set<string>()
      const sub = {
        kind,
        deliver(e: LoggedEvent) {
          if (!mine(e)) return
          if (pending) pending.push(e)
          else if (!replayed.has(e.seq)) send(e)
        },
      }
      conn.onClose(() => poller.leave(sub))
      try {
        const { upTo, settled } = await poller.join(sub)
        const sendReplayed = (e: LoggedEvent) => {
          if (isAfterSeq(e.seq, settled)) replayed.add(e.seq)
          return send(e)
        }
        const bounds = { end, upTo, mine, send: sendReplayed }
        // start_time replays by event time, as X's; backfill_minutes what was applied (so sent
        // live) in the last minutes, whatever the events' own times (a sweep's are hours old).
        if (start) {
          await replay(conn, kind, { from: start, ...bounds })
        } else if (backfill > 0) {
          const since = new Date(now.getTime() - backfill * 60_000)
          const afterSeq = await complianceLogSeqBefore(db, since)
          await replay(conn, kind, { afterSeq, ...bounds })
        }
      } catch (err) {
        // The response is already the stream's: a failure ends it as X's streams end, and the
        // client reconnects (with backfill_minutes) as it would after any disconnect.
        log.warn({ err }, 'compliance stream replay failed; disconnecting')
        conn.disconnect('OperationalDisconnect')
        return undefined
      }
      for (const e of pending) if (!replayed.has(e.seq)) send(e)
      pending = null
      if (end) endAt(conn, end, ctx.now())
      return undefined
    }

  /** The log from `from` (event time) or after `afterSeq`, up to the poller's `upTo`, in seq order. */
  const replay = async (
    conn: StreamConnection,
    kind: LogKind,
    r: {
      from?: Date
      afterSeq?: string
      end: Date | undefined
      upTo: string
      mine: (e: { id: string; eventAt: string }) => boolean
      send: (e: LoggedEvent) => boolean
    },
  ) => {
    let afterSeq = r.afterSeq
    for (;;) {
      if (!conn.open) return
      const page = await complianceLogPage(db, {
        kind,
        startTime: r.from?.toISOString(),
        endTime: r.end?.toISOString(),
        afterSeq,
        limit: REPLAY_PAGE,
      })
      for (const e of page) {
        if (isAfterSeq(e.seq, r.upTo)) return
        if (r.mine(e)) r.send(e)
      }
      if (page.length < REPLAY_PAGE) return
      afterSeq = page[page.length - 1]!.seq
    }
  }

  /** A stream with an `end_time` ends once it has passed (at once when it already has). */
  const endAt = (conn: StreamConnection, end: Date, now: Date) => {
    const wait = end.getTime() - now.getTime()
    if (wait <= 0) return conn.end()
    const timer = setTimeout(() => conn.end(), wait + deps.options.logPollMs * 2)
    timer.unref()
    conn.onClose(() => clearTimeout(timer))
  }

  addRoute(app, ctx, TWEETS_COMPLIANCE_STREAM, serve('tweet'))
  addRoute(app, ctx, USERS_COMPLIANCE_STREAM, serve('user'))
}
