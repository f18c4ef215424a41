import type { ServerResponse } from 'node:http'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { ApiMetrics } from '@threadline/metrics'

/** Long-lived streaming endpoints (`search-stream`, `activity-stream`), by their endpoint name. */
function streamName(request: FastifyRequest): string | undefined {
  const name = request.routeOptions.config?.endpoint?.name
  return name?.endsWith('-stream') ? name : undefined
}

/**
 * HTTP metrics of the API: every request by method, route pattern (never the raw URL: bounded
 * labels) and status, a latency histogram, and the open stream connections. A stream is counted
 * when its socket closes (`finish` never comes for a client that just goes away) and kept out of
 * the histogram, where its duration would drown the requests'.
 */
export function instrumentHttp(app: FastifyInstance, metrics: ApiMetrics): void {
  const open = new Map<string, Set<ServerResponse>>()
  // Streams counted at close; a stream route refused before our hook ran is counted on response.
  const tracked = new WeakSet<ServerResponse>()
  const streamCount = (stream: string) => () => {
    let n = 0
    // Open = the 200 went out and the stream has not ended (refusals answer 4xx; ends set writableEnded).
    for (const res of open.get(stream) ?? []) {
      if (res.headersSent && res.statusCode === 200 && !res.writableEnded) n += 1
    }
    return n
  }
  for (const stream of ['search-stream', 'activity-stream']) {
    open.set(stream, new Set())
    metrics.streamConnections(stream, streamCount(stream))
  }

  app.addHook('onRequest', async (request, reply) => {
    const stream = streamName(request)
    if (!stream) return
    const res = reply.raw
    const set = open.get(stream) ?? open.set(stream, new Set()).get(stream)!
    set.add(res)
    tracked.add(res)
    const started = performance.now()
    res.once('close', () => {
      set.delete(res)
      metrics.request({
        method: request.method,
        route: request.routeOptions.url ?? 'unmatched',
        status: res.statusCode,
        seconds: (performance.now() - started) / 1000,
        stream: true,
      })
    })
  })

  app.addHook('onResponse', async (request, reply) => {
    if (tracked.has(reply.raw)) return
    metrics.request({
      method: request.method,
      route: request.routeOptions.url ?? 'unmatched',
      status: reply.statusCode,
      seconds: reply.elapsedTime / 1000,
      stream: false,
    })
  })
}
