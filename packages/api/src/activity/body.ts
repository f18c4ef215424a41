import type { FastifyRequest } from 'fastify'
import { isId } from '@threadline/domain'
import { EVENT_TYPES } from '@threadline/activity'
import { InvalidRequestError, type InvalidParameter } from '../errors.js'

const ID_PATTERN = '^[0-9]{1,19}$'

/** The JSON object body of a request: content type checked, parsed (X's messages on failure). */
export function jsonObjectBody(
  request: FastifyRequest,
  required: boolean,
): Record<string, unknown> {
  const raw = request.body
  if ((raw === undefined || raw === null || raw === '') && !required) return {}
  const type = request.headers['content-type']
  if (!type || !/^application\/json\s*(;|$)/i.test(type)) {
    throw fail('body', [], 'Requests with bodies must have content-type of application/json.')
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(String(raw))
  } catch {
    throw fail('body', [], 'The request body is not valid JSON.')
  }
  if (!isObject(parsed)) throw fail('body', [], 'The request body must be a JSON object.')
  return parsed
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

function fail(name: string, values: string[], message: string): InvalidRequestError {
  return new InvalidRequestError([{ parameters: { [name]: values }, message }])
}

const shown = (v: unknown) => (typeof v === 'string' ? v : JSON.stringify(v))

/** Collects every failed check of a body, reported together as one 400. */
class Checks {
  readonly errors: InvalidParameter[] = []
  add(name: string, value: unknown, message: string) {
    this.errors.push({ parameters: { [name]: value === undefined ? [] : [shown(value)] }, message })
  }
  unknownKeys(body: Record<string, unknown>, allowed: readonly string[], where = '') {
    for (const key of Object.keys(body)) {
      if (!allowed.includes(key)) {
        this.add(
          `${where}${key}`,
          body[key],
          `The body parameter [${where}${key}] is not one of [${allowed.join(',')}]`,
        )
      }
    }
  }
  string(name: string, value: unknown, min: number, max: number): string | undefined {
    if (typeof value !== 'string') {
      this.add(name, value, `The \`${name}\` body parameter must be a string`)
      return undefined
    }
    const length = [...value].length
    if (length < min || length > max) {
      this.add(
        name,
        value,
        `The length of the \`${name}\` body parameter [${length}] is not between ${min} and ${max}`,
      )
      return undefined
    }
    return value
  }
  id(name: string, value: unknown): string | undefined {
    if (typeof value !== 'string' || !isId(value)) {
      this.add(
        name,
        value,
        `The \`${name}\` body parameter value [${shown(value)}] does not match ${ID_PATTERN}`,
      )
      return undefined
    }
    return value
  }
  throwIfAny() {
    if (this.errors.length > 0) throw new InvalidRequestError(this.errors)
  }
}

export interface CreateSubscriptionBody {
  event_type: string
  user_id?: string
  keyword?: string
  tag?: string
  webhook_id?: string
}

/** `POST /2/activity/subscriptions` body (X's ActivitySubscriptionCreateRequest, our event types). */
export function parseCreateSubscription(body: Record<string, unknown>): CreateSubscriptionBody {
  const c = new Checks()
  c.unknownKeys(body, ['event_type', 'filter', 'tag', 'webhook_id'])
  let eventType: string | undefined
  if (body.event_type === undefined) {
    c.add('event_type', undefined, 'The `event_type` body parameter can not be empty')
  } else if (typeof body.event_type !== 'string' || !EVENT_TYPES.includes(body.event_type)) {
    c.add(
      'event_type',
      body.event_type,
      `The \`event_type\` body parameter value [${shown(body.event_type)}] is not one of [${EVENT_TYPES.join(',')}]`,
    )
  } else {
    eventType = body.event_type
  }
  let userId: string | undefined
  let keyword: string | undefined
  const filter = body.filter
  if (filter === undefined) {
    c.add('filter', undefined, 'The `filter` body parameter can not be empty')
  } else if (!isObject(filter)) {
    c.add(
      'filter',
      filter,
      'The `filter` body parameter must be an object with `user_id` and/or `keyword`',
    )
  } else {
    const f = filter
    c.unknownKeys(f, ['user_id', 'keyword'], 'filter.')
    if (f.user_id !== undefined) userId = c.id('filter.user_id', f.user_id)
    if (f.keyword !== undefined) keyword = c.string('filter.keyword', f.keyword, 1, 150)
    if (f.user_id === undefined && f.keyword === undefined) {
      c.add('filter', filter, 'The `filter` body parameter must hold `user_id` and/or `keyword`')
    }
  }
  const tag = body.tag === undefined ? undefined : c.string('tag', body.tag, 1, 200)
  const webhookId = body.webhook_id === undefined ? undefined : c.id('webhook_id', body.webhook_id)
  c.throwIfAny()
  return { event_type: eventType!, user_id: userId, keyword, tag, webhook_id: webhookId }
}

/** `PUT /2/activity/subscriptions/:id` body: `{tag?, webhook_id?}`. */
export function parseUpdateSubscription(body: Record<string, unknown>): {
  tag?: string
  webhook_id?: string
} {
  const c = new Checks()
  c.unknownKeys(body, ['tag', 'webhook_id'])
  const tag = body.tag === undefined ? undefined : c.string('tag', body.tag, 1, 200)
  const webhookId = body.webhook_id === undefined ? undefined : c.id('webhook_id', body.webhook_id)
  c.throwIfAny()
  return { tag, webhook_id: webhookId }
}

/** `POST /2/webhooks` body: `{url}` (1–200 characters, as X). */
export function parseCreateWebhook(body: Record<string, unknown>): { url: string } {
  const c = new Checks()
  c.unknownKeys(body, ['url'])
  let url: string | undefined
  if (body.url === undefined) c.add('url', undefined, 'The `url` body parameter can not be empty')
  else url = c.string('url', body.url, 1, 200)
  c.throwIfAny()
  return { url: url! }
}
