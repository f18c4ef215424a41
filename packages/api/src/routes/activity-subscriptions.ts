import type { FastifyInstance } from 'fastify'
import {
  countSubscriptions,
  createSubscription,
  deleteSubscription,
  listSubscriptions,
  updateSubscription,
} from '@threadline/db'
import { isId } from '@threadline/domain'
import { PROBLEM_BASE } from '../errors.js'
import {
  jsonObjectBody,
  parseCreateSubscription,
  parseUpdateSubscription,
} from '../activity/body.js'
import type { ActivityApiOptions } from '../activity/options.js'
import { conflict, resourceNotFound, subscriptionCap, subscriptionWire } from '../activity/wire.js'
import { NO_PARAMS, SUBSCRIPTION_ID_PARAMS, SUBSCRIPTIONS_GET_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'
import { addRoute, type Body, type Endpoint } from './route.js'
import { invalidToken } from './window.js'

export const SUBSCRIPTIONS_LIST = {
  method: 'GET',
  url: '/2/activity/subscriptions',
  name: 'activity-subscriptions-list',
  group: 'rules',
  params: SUBSCRIPTIONS_GET_PARAMS,
  summary: "The app's activity subscriptions",
} as const satisfies Endpoint<typeof SUBSCRIPTIONS_GET_PARAMS>

export const SUBSCRIPTIONS_CREATE = {
  method: 'POST',
  url: '/2/activity/subscriptions',
  name: 'activity-subscriptions-create',
  group: 'rules',
  params: NO_PARAMS,
  summary: 'Create an activity subscription',
} as const satisfies Endpoint<typeof NO_PARAMS>

export const SUBSCRIPTIONS_UPDATE = {
  method: 'PUT',
  url: '/2/activity/subscriptions/:subscription_id',
  name: 'activity-subscriptions-update',
  group: 'rules',
  params: SUBSCRIPTION_ID_PARAMS,
  summary: 'Change a subscription',
} as const satisfies Endpoint<typeof SUBSCRIPTION_ID_PARAMS>

export const SUBSCRIPTIONS_DELETE = {
  method: 'DELETE',
  url: '/2/activity/subscriptions/:subscription_id',
  name: 'activity-subscriptions-delete',
  group: 'rules',
  params: SUBSCRIPTION_ID_PARAMS,
  summary: 'Delete a subscription',
} as const satisfies Endpoint<typeof SUBSCRIPTION_ID_PARAMS>

/**
 * Activity subscriptions (docs/api.md §4.2), scoped to the caller's app: another app's id is
 * answered exactly like an id that does not exist.
 */
export function registerSubscriptionRoutes(
  app: FastifyInstance,
  ctx: ServerContext,
  options: ActivityApiOptions,
): void {
  const { db, pageTokens } = ctx

  addRoute(app, ctx, SUBSCRIPTIONS_LIST, async (c) => {
    const appId = c.client.app_id
    const limit = c.params.max_results ?? 100
    const scope = `activity-subscriptions\n${appId}`
    const token = c.params.pagination_token
    let beforeId: string | undefined
    if (token !== undefined) {
      beforeId = pageTokens.decode(scope, token)
      if (beforeId === undefined || !isId(beforeId)) throw invalidToken('pagination_token', token)
    }
    const [rows, total] = await Promise.all([
      listSubscriptions(db, appId, { limit: limit + 1, beforeId }),
      countSubscriptions(db, appId),
    ])
    const more = rows.length > limit
    if (more) rows.length = limit
    const meta: Body = { total_subscriptions: total, result_count: rows.length }
    if (more) meta.next_token = pageTokens.encode(scope, rows[rows.length - 1]!.id)
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
  })

  addRoute(app, ctx, SUBSCRIPTIONS_CREATE, async (c) => {
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
  })

  addRoute(app, ctx, SUBSCRIPTIONS_UPDATE, async (c) => {
    const id = c.params.subscription_id
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
  })

  addRoute(app, ctx, SUBSCRIPTIONS_DELETE, async (c) => {
    const id = c.params.subscription_id
    const result = await deleteSubscription(db, c.client.app_id, id)
    if (!result) throw resourceNotFound('subscription', id)
    return { body: { data: { deleted: true }, meta: { total_subscriptions: result.total } } }
  })
}
