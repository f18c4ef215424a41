import type { FastifyInstance } from 'fastify'
import { runCrc } from '@threadline/activity'
import {
  countSubscriptions,
  createSubscription,
  createWebhook,
  deleteSubscription,
  deleteWebhook,
  findApp,
  findWebhook,
  listSubscriptions,
  listWebhooks,
  recordCrc,
  updateSubscription,
} from '@threadline/db'
import { isId } from '@threadline/domain'
import { activityStreamKey, readActivity, type ActivityReader } from '@threadline/queue'
import { createConnectionSlots, type Redis } from '@threadline/redis'
import { InvalidRequestError, PROBLEM_BASE, invalidRequest } from '../errors.js'
import { parseParams, queryEntries, type EndpointParams, type ParsedParams } from '../params.js'
import { StreamRegistry, type StreamConnection } from '../stream/connection.js'
import type { AuthedApp, RateGroup, ServerContext } from '../types.js'
import { DEFAULT_ACTIVITY_OPTIONS, type ActivityApiOptions } from './options.js'
import {
  jsonObjectBody,
  parseCreateSubscription,
  parseCreateWebhook,
  parseUpdateSubscription,
} from './body.js'
import {
  conflict,
  crcFailed,
  resourceNotFound,
  subscriptionCap,
  subscriptionWire,
  webhookCap,
  webhookWire,
} from './wire.js'

const SUBSCRIPTIONS_GET_PARAMS = {
  max_results: { kind: 'int', min: 1, max: 1000 },
  pagination_token: { kind: 'string' },
} as const satisfies EndpointParams
const NO_PARAMS = {} as const satisfies EndpointParams
const SUBSCRIPTION_ID_PARAMS = {
  subscription_id: { kind: 'id', required: true, description: 'A subscription id' },
} as const satisfies EndpointParams
const WEBHOOK_ID_PARAMS = {
  webhook_id: { kind: 'id', required: true, description: 'A webhook id' },
} as const satisfies EndpointParams
const WEBHOOKS_GET_PARAMS = {
  'webhook_config.fields': { kind: 'list', values: ['created_at', 'id', 'url', 'valid'] },
} as const satisfies EndpointParams
const STREAM_PARAMS = {
  backfill_minutes: { kind: 'int', min: 0, max: 5 },
} as const satisfies EndpointParams

type Body = Record<string, unknown>

interface Ctx {
  params: ParsedParams
  client: AuthedApp
  request: Parameters<Parameters<FastifyInstance['route']>[0]['handler']>[0]
  reply: Parameters<Parameters<FastifyInstance['route']>[0]['handler']>[1]
}

/**
 * Activity subscriptions, webhooks and the activity stream (docs/api.md §4). Everything is scoped to the
 * caller's app: another app's id is answered exactly like an id that does not exist.
 */
export function registerActivityRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  deps: { redis: Redis; prefix: string; options?: Partial<ActivityApiOptions> },
): void {
  const { db, log } = ctx
  const options = { ...DEFAULT_ACTIVITY_OPTIONS, ...deps.options }
  const group: RateGroup = 'rules'
  const outbound = {
    allowPrivate: options.allowPrivate,
    timeoutMs: options.crcTimeoutMs,
    maxResponseBytes: options.maxResponseBytes,
    lookup: options.lookup,
  }

  const route = (
    method: 'GET' | 'POST' | 'PUT' | 'DELETE',
    url: string,
    endpoint: { name: string; params: EndpointParams; summary: string },
    handler: (c: Ctx) => Promise<{ status?: number; body: Body } | undefined>,
  ) => {
    app.route({
      method,
      url,
      config: { endpoint: { ...endpoint, group } },
      handler: async (request, reply) => {
        const params = parseParams(
          endpoint.params,
          queryEntries(request.url),
          (request.params ?? {}) as Record<string, string>,
        )
        const result = await handler({ params, client: request.client!, request, reply })
        if (!result) return reply // the handler took the response over (a stream)
        return reply.status(result.status ?? 200).send(result.body)
      },
    })
  }

  // --- subscriptions (docs/api.md §4.2) ---
  route(
    'GET',
    '/2/activity/subscriptions',
    {
      name: 'activity-subscriptions-list',
      params: SUBSCRIPTIONS_GET_PARAMS,
      summary: "The app's activity subscriptions",
    },
    async (c) => {
      const appId = c.client.app_id
      const limit = (c.params.max_results as number | undefined) ?? 100
      const scope = `activity-subscriptions\n${appId}`
      const token = c.params.pagination_token as string | undefined
      let beforeId: string | undefined
      if (token !== undefined) {
        beforeId = ctx.pageTokens.decode(scope, token)
        if (beforeId === undefined || !isId(beforeId)) {
          throw invalidRequest(
            'pagination_token',
            [token],
            `The \`pagination_token\` query parameter value [${token}] is not a valid token for this request`,
          )
        }
      }
      const [rows, total] = await Promise.all([
        listSubscriptions(db, appId, { limit: limit + 1, beforeId }),
        countSubscriptions(db, appId),
      ])
      const more = rows.length > limit
      if (more) rows.length = limit
      const meta: Body = { total_subscriptions: total, result_count: rows.length }
      if (more) meta.next_token = ctx.pageTokens.encode(scope, rows[rows.length - 1]!.id)
      const errors = rows
        .filter((r) => r.webhook_state === 'invalid' || r.webhook_state === 'missing')
        .map((r) => ({
          resource_type: 'webhook',
          resource_id: r.webhook_id,
          parameter: 'webhook_id',
          value: r.webhook_id,
          title: 'Invalid Webhook',
          detail:
            r.webhook_state === 'missing'
              ? `Subscription ${r.id} points at webhook ${r.webhook_id}, which no longer exists; its events are not delivered to a webhook.`
              : `Subscription ${r.id} points at webhook ${r.webhook_id}, which failed its CRC check and is no longer valid; re-validate it with PUT /2/webhooks/${r.webhook_id}.`,
          type: `${PROBLEM_BASE}invalid-webhook`,
        }))
      const body: Body = {}
      if (rows.length > 0) body.data = rows.map(subscriptionWire)
      if (errors.length > 0) body.errors = errors
      body.meta = meta
      return { body }
    },
  )

  route(
    'POST',
    '/2/activity/subscriptions',
    {
      name: 'activity-subscriptions-create',
      params: NO_PARAMS,
      summary: 'Create an activity subscription',
    },
    async (c) => {
      const input = parseCreateSubscription(jsonObjectBody(c.request, true))
      const result = await createSubscription(db, c.client.app_id, input, {
        cap: options.subscriptionCap,
      })
      switch (result.kind) {
        case 'webhook_not_found':
          throw resourceNotFound('webhook', input.webhook_id!)
        case 'conflict':
          throw conflict()
        case 'cap_exceeded':
          throw subscriptionCap(options.subscriptionCap)
        case 'created':
          return {
            status: 201,
            body: {
              data: { subscription: subscriptionWire(result.subscription) },
              meta: { total_subscriptions: result.total },
            },
          }
      }
    },
  )

  route(
    'PUT',
    '/2/activity/subscriptions/:subscription_id',
    {
      name: 'activity-subscriptions-update',
      params: SUBSCRIPTION_ID_PARAMS,
      summary: 'Change a subscription',
    },
    async (c) => {
      const id = c.params.subscription_id as string
      const change = parseUpdateSubscription(jsonObjectBody(c.request, false))
      const result = await updateSubscription(db, c.client.app_id, id, change)
      switch (result.kind) {
        case 'not_found':
          throw resourceNotFound('subscription', id)
        case 'webhook_not_found':
          throw resourceNotFound('webhook', change.webhook_id!)
        case 'conflict':
          throw conflict()
        case 'updated':
          return {
            body: {
              data: { subscription: subscriptionWire(result.subscription) },
              meta: { total_subscriptions: result.total },
            },
          }
      }
    },
  )

  route(
    'DELETE',
    '/2/activity/subscriptions/:subscription_id',
    {
      name: 'activity-subscriptions-delete',
      params: SUBSCRIPTION_ID_PARAMS,
      summary: 'Delete a subscription',
    },
    async (c) => {
      const id = c.params.subscription_id as string
      const result = await deleteSubscription(db, c.client.app_id, id)
      if (!result) throw resourceNotFound('subscription', id)
      return { body: { data: { deleted: true }, meta: { total_subscriptions: result.total } } }
    },
  )

  // --- webhooks (docs/api.md §4.3) ---
  const appSecret = async (appId: string) => {
    const row = await findApp(db, appId)
    if (!row) throw new Error(`app ${appId} vanished`)
    return row.consumer_secret
  }

  route(
    'GET',
    '/2/webhooks',
    { name: 'webhooks-list', params: WEBHOOKS_GET_PARAMS, summary: "The app's webhooks" },
    async (c) => {
      const rows = await listWebhooks(db, c.client.app_id)
      const body: Body = {}
      if (rows.length > 0) body.data = rows.map(webhookWire)
      body.meta = { result_count: rows.length }
      return { body }
    },
  )

  route(
    'POST',
    '/2/webhooks',
    {
      name: 'webhooks-create',
      params: NO_PARAMS,
      summary: 'Register a webhook (runs the CRC check)',
    },
    async (c) => {
      const { url } = parseCreateWebhook(jsonObjectBody(c.request, true))
      const crc = await runCrc(url, await appSecret(c.client.app_id), outbound)
      if (!crc.ok) {
        if (crc.refused)
          throw new InvalidRequestError([{ parameters: { url: [url] }, message: crc.reason }])
        throw crcFailed(crc.reason)
      }
      const hook = await createWebhook(db, c.client.app_id, url, { cap: options.webhookCap })
      if (!hook) throw webhookCap(options.webhookCap)
      return { body: { data: webhookWire(hook) } }
    },
  )

  route(
    'PUT',
    '/2/webhooks/:webhook_id',
    { name: 'webhooks-validate', params: WEBHOOK_ID_PARAMS, summary: 'Re-run the CRC check' },
    async (c) => {
      const id = c.params.webhook_id as string
      const hook = await findWebhook(db, c.client.app_id, id)
      if (!hook) throw resourceNotFound('webhook', id)
      const crc = await runCrc(hook.url, await appSecret(c.client.app_id), outbound)
      await recordCrc(db, id, crc.ok, { maxFailures: 1 })
      if (!crc.ok) throw crcFailed(crc.reason)
      return { body: { data: { valid: true } } }
    },
  )

  route(
    'DELETE',
    '/2/webhooks/:webhook_id',
    { name: 'webhooks-delete', params: WEBHOOK_ID_PARAMS, summary: 'Delete a webhook' },
    async (c) => {
      const id = c.params.webhook_id as string
      if (!(await deleteWebhook(db, c.client.app_id, id))) throw resourceNotFound('webhook', id)
      return { body: { data: { deleted: true } } }
    },
  )

  // --- the activity stream (docs/api.md §4.2): events fanned out from the delivery service ---
  const slots = createConnectionSlots(deps.redis, { prefix: deps.prefix, logger: log })
  const registry = new StreamRegistry({
    kind: 'activity',
    maxPerApp: options.streamMaxConnections,
    keepAliveMs: options.keepAliveMs,
    maxBufferedBytes: options.maxBufferedBytes,
    slots,
    logger: log,
  })
  /** Connections still replaying their backfill hold live events until it is sent. */
  const held = new Map<StreamConnection, string[]>()
  /**
   * What a connection's backfill sent, while the live reader may still be behind it (the reader
   * follows every app's events and can lag in a burst): live events found here were sent already.
   * The reader hands an app's events over in stream order, so the first one not found here is
   * past the backfill, and the set is dropped.
   */
  const replayed = new Map<StreamConnection, Set<string>>()
  const sendLive = (conn: StreamConnection, body: string) => {
    const sent = replayed.get(conn)
    if (sent) {
      if (sent.has(body)) return
      replayed.delete(conn)
    }
    conn.send(body)
  }
  let reader: ActivityReader | undefined
  const ensureReader = async () => {
    reader ??= readActivity(
      deps.redis,
      deps.prefix,
      (entries) => {
        for (const e of entries) {
          for (const conn of registry.connections(e.app_id)) {
            const pending = held.get(conn)
            if (pending) pending.push(e.body)
            else sendLive(conn, e.body)
          }
        }
      },
      { logger: log },
    )
    await reader.ready
  }
  app.addHook('preClose', async () => {
    await registry.closeAll()
  })
  app.addHook('onClose', async () => {
    slots.close()
    await reader?.close()
  })

  route(
    'GET',
    '/2/activity/stream',
    { name: 'activity-stream', params: STREAM_PARAMS, summary: 'Activity events as they happen' },
    async (c) => {
      const appId = c.client.app_id
      const backfill = (c.params.backfill_minutes as number | undefined) ?? 0
      await ensureReader()
      const conn = await registry.open(c.reply, appId)
      if (backfill > 0) {
        held.set(conn, [])
        conn.onClose(() => {
          held.delete(conn)
          replayed.delete(conn)
        })
        try {
          const past = await backfillActivity(deps.redis, deps.prefix, appId, backfill * 60_000)
          for (const body of past) if (!conn.send(body)) break
          // Live events published during the read, or still behind a lagging reader, are in
          // the window too: each is sent once.
          if (conn.open && past.length > 0) replayed.set(conn, new Set(past))
        } catch (err) {
          log.warn({ err }, 'activity backfill failed; continuing live')
        }
        const pending = held.get(conn) ?? []
        held.delete(conn)
        for (const body of pending) sendLive(conn, body)
      }
      return undefined
    },
  )
}

/**
 * One app's event lines of the last `sinceMs`, oldest first. The activity stream holds every app's
 * events, so the window is read page by page to its end: a single capped read would stop inside a
 * busy window and leave a gap before the live events (which are held from just before this read).
 * Past `limit` lines for the app, the oldest are dropped, keeping the replay contiguous with live.
 */
export async function backfillActivity(
  redis: Redis,
  prefix: string,
  appId: string,
  sinceMs: number,
  { page = 2_000, limit = 10_000 }: { page?: number; limit?: number } = {},
): Promise<string[]> {
  const key = activityStreamKey(prefix)
  const out: string[] = []
  let start = `${Date.now() - sinceMs}-0`
  for (;;) {
    const raw = (await redis.xrange(key, start, '+', 'COUNT', page)) as Array<[string, string[]]>
    for (const [, fields] of raw) {
      let app: string | undefined
      let body: string | undefined
      for (let i = 0; i + 1 < fields.length; i += 2) {
        if (fields[i] === 'app') app = fields[i + 1]
        else if (fields[i] === 'body') body = fields[i + 1]
      }
      if (app === appId && body !== undefined) out.push(body)
    }
    if (out.length > limit) out.splice(0, out.length - limit)
    if (raw.length < page) return out
    start = `(${raw[raw.length - 1]![0]}`
  }
}
