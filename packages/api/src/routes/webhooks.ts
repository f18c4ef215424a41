import type { FastifyInstance } from 'fastify'
import { runCrc } from '@threadline/activity'
import {
  createWebhook,
  deleteWebhook,
  findApp,
  findWebhook,
  listWebhooks,
  recordCrc,
} from '@threadline/db'
import { InvalidRequestError } from '../errors.js'
import { jsonObjectBody, parseCreateWebhook } from '../activity/body.js'
import type { ActivityApiOptions } from '../activity/options.js'
import { crcFailed, resourceNotFound, webhookCap, webhookWire } from '../activity/wire.js'
import { NO_PARAMS, WEBHOOK_ID_PARAMS, WEBHOOKS_GET_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { addRoute, type Body, type Endpoint } from './route.js'

export const WEBHOOKS_LIST = {
  method: 'GET',
  url: '/2/webhooks',
  name: 'webhooks-list',
  group: 'rules',
  params: WEBHOOKS_GET_PARAMS,
  summary: "The app's webhooks",
} as const satisfies Endpoint<typeof WEBHOOKS_GET_PARAMS>

export const WEBHOOKS_CREATE = {
  method: 'POST',
  url: '/2/webhooks',
  name: 'webhooks-create',
  group: 'rules',
  params: NO_PARAMS,
  summary: 'Register a webhook (runs the CRC check)',
} as const satisfies Endpoint<typeof NO_PARAMS>

export const WEBHOOKS_VALIDATE = {
  method: 'PUT',
  url: '/2/webhooks/:webhook_id',
  name: 'webhooks-validate',
  group: 'rules',
  params: WEBHOOK_ID_PARAMS,
  summary: 'Re-run the CRC check',
} as const satisfies Endpoint<typeof WEBHOOK_ID_PARAMS>

export const WEBHOOKS_DELETE = {
  method: 'DELETE',
  url: '/2/webhooks/:webhook_id',
  name: 'webhooks-delete',
  group: 'rules',
  params: WEBHOOK_ID_PARAMS,
  summary: 'Delete a webhook',
} as const satisfies Endpoint<typeof WEBHOOK_ID_PARAMS>

/** Webhooks (docs/api.md §4.3), scoped to the caller's app like subscriptions. */
export function registerWebhookRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  options: ActivityApiOptions,
): void {
  const { db } = ctx
  const outbound = {
    allowPrivate: options.allowPrivate,
    timeoutMs: options.crcTimeoutMs,
    maxResponseBytes: options.maxResponseBytes,
    lookup: options.lookup,
  }
  const appSecret = async (appId: string) => {
    const row = await findApp(db, appId)
    if (!row) throw new Error(`app ${appId} vanished`)
    return row.consumer_secret
  }

  addRoute(app, ctx, WEBHOOKS_LIST, async (c) => {
    const rows = await listWebhooks(db, c.client.app_id)
    const body: Body = {}
    if (rows.length > 0) body.data = rows.map(webhookWire)
    body.meta = { result_count: rows.length }
    return { body }
  })

  addRoute(app, ctx, WEBHOOKS_CREATE, async (c) => {
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
  })

  addRoute(app, ctx, WEBHOOKS_VALIDATE, async (c) => {
    const id = c.params.webhook_id
    const hook = await findWebhook(db, c.client.app_id, id)
    if (!hook) throw resourceNotFound('webhook', id)
    const crc = await runCrc(hook.url, await appSecret(c.client.app_id), outbound)
    await recordCrc(db, id, crc.ok, { maxFailures: 1 })
    if (!crc.ok) throw crcFailed(crc.reason)
    return { body: { data: { valid: true } } }
  })

  addRoute(app, ctx, WEBHOOKS_DELETE, async (c) => {
    const id = c.params.webhook_id
    if (!(await deleteWebhook(db, c.client.app_id, id))) throw resourceNotFound('webhook', id)
    return { body: { data: { deleted: true } } }
  })
}
