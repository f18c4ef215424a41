import { FIELD_PARAMS, int, invalid, time } from '../params.js'
import { viewOf } from '../serialize.js'
import { defineRoute, JSON_TYPE, type SimContext, type SimRoute } from './route.js'

/** `GET /2/tweets/search/stream`: the filtered stream of the Posts matching the rules. */
export function streamRoutes(ctx: SimContext): SimRoute[] {
  const { world, rules, hub } = ctx
  const connect = defineRoute(
    {
      method: 'GET',
      path: '/2/tweets/search/stream',
      fault: 'stream',
      window: 'stream',
      params: {
        backfill_minutes: int(0, 0, 5),
        start_time: time,
        end_time: time,
        ...FIELD_PARAMS,
      },
    },
    ({ params, res }) => {
      const view = viewOf(params)
      if (!ctx.grantBackfill && params.backfill_minutes > 0) {
        const raw = String(params.backfill_minutes)
        throw invalid(
          'backfill_minutes',
          raw,
          'The `backfill_minutes` query parameter is not available with your access level.',
        )
      }
      if (rules.size === 0) {
        return {
          status: 409,
          body: JSON.stringify({
            title: 'ConnectionException',
            detail:
              'You must define rules using the POST /2/tweets/search/stream/rules endpoint before connecting to filtered stream.',
            connection_issue: 'RuleConfigurationIssue',
            type: 'https://api.twitter.com/2/problems/streaming-connection',
          }),
        }
      }
      if (hub.size >= ctx.maxConnections) {
        return {
          status: 429,
          body: JSON.stringify({
            title: 'ConnectionException',
            detail: 'This stream is currently at the maximum allowed connection limit.',
            connection_issue: 'TooManyConnections',
            type: 'https://api.twitter.com/2/problems/streaming-connection',
          }),
        }
      }
      ctx.connected()
      res.statusCode = 200
      res.setHeader('content-type', JSON_TYPE)
      res.socket?.setNoDelay(true)
      res.flushHeaders()
      const backfill = params.backfill_minutes
      const backlog = backfill > 0 ? world.since(Date.now() - backfill * 60_000) : []
      hub.open(res, view, backlog)
      return undefined
    },
  )
  return [connect]
}
