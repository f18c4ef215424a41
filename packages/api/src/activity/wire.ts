import type { ActivitySubscription, Webhook } from '@threadline/db'
import { formatSecondsTime } from '@threadline/domain'
import { ApiError, InvalidRequestError, PROBLEM_BASE } from '../errors.js'

/** `YYYY-MM-DDTHH:MM:SSZ`; pg hands timestamptz over as a Date. */
const seconds = (d: unknown) => formatSecondsTime(d instanceof Date ? d : new Date(String(d)))

/** A subscription as docs/api.md §4.1 shows it (times without milliseconds, empty members left out). */
export function subscriptionWire(s: ActivitySubscription) {
  const filter: { user_id?: string; keyword?: string } = {}
  if (s.filter_user_id !== null) filter.user_id = s.filter_user_id
  if (s.filter_keyword !== null) filter.keyword = s.filter_keyword
  return {
    subscription_id: s.id,
    event_type: s.event_type,
    filter,
    ...(s.tag !== null ? { tag: s.tag } : {}),
    ...(s.webhook_id !== null ? { webhook_id: s.webhook_id } : {}),
    created_at: seconds(s.created_at),
    updated_at: seconds(s.updated_at),
  }
}

export function webhookWire(w: Webhook) {
  return { id: w.id, url: w.url, valid: w.valid, created_at: seconds(w.created_at) }
}

/** 404 for an id the app does not have, whether it is another app's or no one's (docs/api.md §4.2). */
export function resourceNotFound(kind: 'subscription' | 'webhook', id: string): ApiError {
  return new ApiError(404, {
    title: 'Not Found Error',
    type: `${PROBLEM_BASE}resource-not-found`,
    status: 404,
    detail: `Could not find ${kind} with id: [${id}].`,
    resource_type: kind,
    resource_id: id,
  })
}

export function conflict(): ApiError {
  return new ApiError(409, {
    title: 'Conflict',
    type: `${PROBLEM_BASE}conflict`,
    status: 409,
    detail: 'An identical subscription (same event_type, filter and webhook) already exists.',
  })
}

export function subscriptionCap(cap: number): ApiError {
  return new ApiError(429, {
    title: 'Too Many Subscriptions',
    type: `${PROBLEM_BASE}subscription-cap`,
    status: 429,
    detail: `This app has reached its cap of ${cap} subscriptions.`,
  })
}

export function webhookCap(cap: number): ApiError {
  return new ApiError(429, {
    title: 'Too Many Webhooks',
    type: `${PROBLEM_BASE}webhook-cap`,
    status: 429,
    detail: `This app has reached its cap of ${cap} webhooks.`,
  })
}

export function crcFailed(reason: string): ApiError {
  return new ApiError(400, {
    title: 'CrcValidationFailed',
    type: `${PROBLEM_BASE}crc-validation-failed`,
    status: 400,
    detail: `The CRC check of the webhook URL failed: ${reason}`,
  })
}

export function bodyError(name: string, value: unknown, message: string): InvalidRequestError {
  const shown =
    value === undefined ? [] : [typeof value === 'string' ? value : JSON.stringify(value)]
  return new InvalidRequestError([{ parameters: { [name]: shown }, message }])
}
