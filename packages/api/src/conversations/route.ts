import type { FastifyInstance } from 'fastify'
import { selection, type FieldSelection } from '@threadline/domain'
import { invalidRequest, type InvalidRequestError } from '../errors.js'
import { parseParams, queryEntries, type EndpointParams, type ParsedParams } from '../params.js'
import type { RateGroup, RouteContext } from '../types.js'

/** A response body: an object for Fastify to serialize, or JSON text already written. */
export type Answer = { body: Record<string, unknown> } | { json: string }

export interface Endpoint {
  name: string
  group: RateGroup
  params: EndpointParams
  summary: string
}

/** Registers a GET route whose query and path parameters are checked against `endpoint.params`. */
export function getRoute(
  app: FastifyInstance,
  now: () => Date,
  url: string,
  endpoint: Endpoint,
  handler: (c: RouteContext) => Promise<Answer>,
): void {
  app.route({
    method: 'GET',
    url,
    config: { endpoint },
    handler: async (request, reply) => {
      const params = parseParams(
        endpoint.params,
        queryEntries(request.url),
        (request.params ?? {}) as Record<string, string>,
      )
      const answer = await handler({ params, client: request.client!, request, reply, now: now() })
      if ('json' in answer) return reply.type('application/json; charset=utf-8').send(answer.json)
      return reply.send(answer.body)
    },
  })
}

export function fieldSelection(p: ParsedParams): FieldSelection {
  return selection(
    (p['tweet.fields'] as string[] | undefined) ?? [],
    (p.expansions as string[] | undefined) ?? [],
    (p['user.fields'] as string[] | undefined) ?? [],
  )
}

/** X's 400 for a token that is not one of ours for this request. */
export function invalidToken(value: string): InvalidRequestError {
  return invalidRequest(
    'pagination_token',
    [value],
    `The \`pagination_token\` query parameter value [${value}] is not a valid token for this request`,
  )
}
