import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { Logger } from '@threadline/logger'
import { createConnectionSlots, type ConnectionSlots, type Redis } from '@threadline/redis'
import { InvalidRequestError } from '../errors.js'
import { ComplianceLogPoller, type LogKind } from '../compliance/log-poller.js'
import { followComplianceLog, type LogStreamDeps } from '../compliance/log-stream.js'
import type { EndpointParams } from '../params.js'
import { StreamRegistry } from '../stream/connection.js'
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

/** The streams' registries, one per kind and partition, made as the first stream opens. */
function complianceStreamRegistries(
  options: ComplianceApiOptions,
  slots: ConnectionSlots,
  log: Logger,
) {
  const registries = new Map<string, StreamRegistry>()
  return {
    of(kind: LogKind, partition: number): StreamRegistry {
      const key = `${kind}-compliance-${partition}`
      let r = registries.get(key)
      if (!r) {
        r = new StreamRegistry({
          kind: key,
          maxPerApp: options.streamMaxConnections,
          keepAliveMs: options.keepAliveMs,
          maxBufferedBytes: options.maxBufferedBytes,
          slots,
          logger: log,
        })
        registries.set(key, r)
      }
      return r
    },
    async closeAll(): Promise<void> {
      await Promise.all([...registries.values()].map((r) => r.closeAll()))
    },
  }
}

type ComplianceStreamRegistries = ReturnType<typeof complianceStreamRegistries>

/** A request whose `start_time` is not before its `end_time`, in X's words. */
function startNotBeforeEnd(request: FastifyRequest): InvalidRequestError {
  return new InvalidRequestError([
    {
      parameters: { start_time: [rawParam(request, 'start_time')] },
      message: `The \`start_time\` query parameter value [${rawParam(request, 'start_time')}] must be before the \`end_time\` query parameter value [${rawParam(request, 'end_time')}]`,
    },
  ])
}

/** One compliance stream: its connection opened on its kind and partition, then fed the log. */
async function serveComplianceStream(
  follow: LogStreamDeps,
  registries: ComplianceStreamRegistries,
  kind: LogKind,
  c: RouteContext<typeof COMPLIANCE_STREAM_PARAMS>,
): Promise<undefined> {
  const { partition, start_time: start, end_time: end } = c.params
  const now = follow.now()
  if (start && end && start >= end) throw startNotBeforeEnd(c.request)
  const backfillMinutes = c.params.backfill_minutes ?? 0
  const conn = await registries.of(kind, partition).open(c.reply, c.client.app_id)
  await followComplianceLog(follow, conn, { kind, partition, start, end, backfillMinutes, now })
  return undefined
}

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
  const { logPollMs } = deps.options
  const follow: LogStreamDeps = {
    db,
    log,
    poller: new ComplianceLogPoller(db, log, logPollMs),
    pollMs: logPollMs,
    now: () => ctx.now(),
  }
  const slots = createConnectionSlots(deps.redis, { prefix: deps.prefix, logger: log })
  const registries = complianceStreamRegistries(deps.options, slots, log)
  app.addHook('preClose', async () => {
    await registries.closeAll()
  })
  app.addHook('onClose', async () => {
    slots.close()
    await follow.poller.close()
  })
  addRoute(app, ctx, TWEETS_COMPLIANCE_STREAM, (c) =>
    serveComplianceStream(follow, registries, 'tweet', c),
  )
  addRoute(app, ctx, USERS_COMPLIANCE_STREAM, (c) =>
    serveComplianceStream(follow, registries, 'user', c),
  )
}
