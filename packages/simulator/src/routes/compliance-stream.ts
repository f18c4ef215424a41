import { COMPLIANCE_PARTITIONS } from '../compliance-stream.js'
import { int, intParam, invalid, time, type Reader } from '../params.js'
import { defineRoute, JSON_TYPE, type SimContext, type SimRoute } from './route.js'

/** X requires `partition` on both compliance streams. */
const partition: Reader<number> = (params, name) => {
  if (!params.has(name)) {
    throw invalid(name, '', `The \`${name}\` query parameter can not be empty`)
  }
  return intParam(params, name, 1, 1, COMPLIANCE_PARTITIONS)
}

const PARAMS = {
  backfill_minutes: int(0, 0, 5),
  end_time: time,
  partition,
  start_time: time,
} as const

/** `GET /2/tweets/compliance/stream` and `GET /2/users/compliance/stream` (X's Enterprise streams). */
export function complianceStreamRoutes(ctx: SimContext): SimRoute[] {
  const { withdrawals, compliance } = ctx
  const route = (kind: 'tweet' | 'user') =>
    defineRoute(
      {
        method: 'GET',
        path: `/2/${kind}s/compliance/stream`,
        fault: 'compliance',
        window: `compliance-stream-${kind}`,
        params: PARAMS,
      },
      ({ params, res }) => {
        const now = Date.now()
        const start = params.start_time?.ms
        const end = params.end_time?.ms
        if (start !== undefined && start > now) {
          const raw = params.start_time!.raw
          throw invalid(
            'start_time',
            raw,
            `Invalid 'start_time':'${raw}'. 'start_time' must be in the past`,
          )
        }
        if (start !== undefined && end !== undefined && end <= start) {
          const raw = params.end_time!.raw
          throw invalid(
            'end_time',
            raw,
            `Invalid 'end_time':'${raw}'. 'end_time' must be after 'start_time'`,
          )
        }
        const from =
          start ?? (params.backfill_minutes > 0 ? now - params.backfill_minutes * 60_000 : now)
        res.statusCode = 200
        res.setHeader('content-type', JSON_TYPE)
        res.socket?.setNoDelay(true)
        res.flushHeaders()
        compliance.open(res, kind, params.partition, withdrawals.between(kind, from, end), end)
        return undefined
      },
    )
  return [route('tweet'), route('user')]
}
