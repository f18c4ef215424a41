import type { FastifyRequest } from 'fastify'
import { invalidRequest, type InvalidRequestError } from '../errors.js'
import { rawParam } from './route.js'

export const DAY_MS = 86_400_000
const RECENT_DAYS = 7

/** The time-window parameters search and counts share, as their specs type them. */
export interface WindowParams {
  start_time?: Date
  end_time?: Date
  since_id?: string
  until_id?: string
}

export interface TimeWindow {
  startTime?: Date
  endTime?: Date
  sinceId?: string
  untilId?: string
}

/** `YYYY-MM-DDTHH:MMZ`, as X's time-window message prints its bound. */
function minuteTime(date: Date): string {
  return date.toISOString().slice(0, 16) + 'Z'
}

/** start/end/since/until, with the recent endpoints' 7-day floor (docs/api.md §2.4). */
export function timeWindow(
  request: FastifyRequest,
  p: WindowParams,
  now: Date,
  recent: boolean,
): TimeWindow {
  const w: TimeWindow = {
    startTime: p.start_time,
    endTime: p.end_time,
    sinceId: p.since_id,
    untilId: p.until_id,
  }
  if (recent) {
    const floor = new Date(now.getTime() - RECENT_DAYS * DAY_MS)
    if (w.startTime && w.startTime < floor) {
      const raw = rawParam(request, 'start_time')
      throw invalidRequest(
        'start_time',
        [raw],
        `Invalid 'start_time':'${raw}'. 'start_time' must be on or after ${minuteTime(floor)}`,
      )
    }
    w.startTime ??= floor
  }
  if (w.startTime && w.endTime && w.endTime <= w.startTime) {
    const raw = rawParam(request, 'end_time')
    throw invalidRequest(
      'end_time',
      [raw],
      `Invalid 'end_time':'${raw}'. 'end_time' must be after 'start_time'`,
    )
  }
  return w
}

/**
 * What a page token is bound to: the endpoint, the query and the window as the client wrote them
 * (plus `extra`), never the page size or the fields. A token from another request is refused.
 */
export function tokenScope(
  request: FastifyRequest,
  endpoint: string,
  query: string,
  w: TimeWindow,
  ...extra: string[]
): string {
  return [
    endpoint,
    query,
    rawParam(request, 'start_time'),
    rawParam(request, 'end_time'),
    w.sinceId ?? '',
    w.untilId ?? '',
    ...extra,
  ].join('\n')
}

/** `next_token` or its alias `pagination_token`; both given must agree. */
export function pageToken(p: {
  next_token?: string
  pagination_token?: string
}): { name: string; value: string } | undefined {
  const next = p.next_token
  const pagination = p.pagination_token
  if (next !== undefined && pagination !== undefined && next !== pagination) {
    throw invalidRequest(
      'pagination_token',
      [pagination],
      'The `next_token` and `pagination_token` query parameters must be the same when both are given',
    )
  }
  if (next !== undefined) return { name: 'next_token', value: next }
  if (pagination !== undefined) return { name: 'pagination_token', value: pagination }
  return undefined
}

export function invalidToken(name: string, value: string): InvalidRequestError {
  return invalidRequest(
    name,
    [value],
    `The \`${name}\` query parameter value [${value}] is not a valid token for this request`,
  )
}
