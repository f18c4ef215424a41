import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { unauthorized } from '../errors.js'
import { parseParams, queryEntries, type EndpointParams, type Params } from '../params.js'
import type { AuthedApp, RateGroup } from '../types.js'

export type Body = Record<string, unknown>

/** A `/2/` endpoint: its rate-limit bucket, its OpenAPI operation and the spec of its parameters. */
export interface Endpoint<E extends EndpointParams> {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE'
  url: string
  name: string
  group: RateGroup
  params: E
  summary: string
}

/** What a handler gets: parameters typed by its endpoint's spec, and the calling app. */
export interface RouteContext<E extends EndpointParams> {
  params: Params<E>
  client: AuthedApp
  request: FastifyRequest
  reply: FastifyReply
  now: Date
}

/**
 * A response: an object for Fastify to serialize, JSON text already written, or `undefined` when
 * the handler took the response over (a stream).
 */
export type Answer = { status?: number; body: Body } | { status?: number; json: string } | undefined

/** The wall clock, for routes whose server has no clock of its own. */
export const systemClock = { now: () => new Date() }

/**
 * Registers one `/2/` route. The query string (and path) is validated against the endpoint's spec
 * before the handler runs, so a bad parameter is X's 400 and the handler sees typed values.
 */
export function addRoute<E extends EndpointParams>(
  app: FastifyInstance,
  clock: { now: () => Date },
  endpoint: Endpoint<E>,
  handler: (c: RouteContext<E>) => Promise<Answer>,
): void {
  app.route<{ Params: Record<string, string> }>({
    method: endpoint.method,
    url: endpoint.url,
    config: { endpoint },
    handler: async (request, reply) => {
      const params = parseParams(endpoint.params, queryEntries(request.url), request.params)
      // Set by the onRequest hook for every route with an endpoint (docs/api.md §1).
      const client = request.client
      if (!client) throw unauthorized()
      const answer = await handler({ params, client, request, reply, now: clock.now() })
      if (answer === undefined) return reply
      reply.status(answer.status ?? 200)
      if ('json' in answer) return reply.type('application/json; charset=utf-8').send(answer.json)
      return reply.send(answer.body)
    },
  })
}

/** Leaves out members with nothing in them (docs/api.md §1: never null, never []). */
export function compact(body: Body): Body {
  const out: Body = {}
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue
    if (Array.isArray(v) && v.length === 0) continue
    out[k] = v
  }
  return out
}

/** A query parameter exactly as the client wrote it (for X's messages, which echo it). */
export function rawParam(request: FastifyRequest, name: string): string {
  return queryEntries(request.url).find(([k]) => k === name)?.[1] ?? ''
}
