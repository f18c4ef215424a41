import type { IncomingMessage, ServerResponse } from 'node:http'
import { parseQuery, type ParamsOf, type ParamsSpec } from '../params.js'
import type { ComplianceJobs } from '../compliance-jobs.js'
import type { ComplianceHub } from '../compliance-stream.js'
import type { RuleCompiler, RuleStore } from '../rules.js'
import type { Route, StreamHub } from '../stream.js'
import type { World } from '../world.js'
import type { Withdrawals } from '../world-withdrawals.js'

export const JSON_TYPE = 'application/json; charset=utf-8'
const MAX_BODY = 1024 * 1024

export const problem = (status: number, title: string, detail: string, extra: object = {}) =>
  JSON.stringify({ title, type: 'about:blank', status, detail, ...extra })

export class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(body)
  }
}

/** X's 400 for a request body it cannot read, to throw. */
export const badBody = (message: string) =>
  new HttpError(
    400,
    JSON.stringify({
      errors: [{ message }],
      title: 'Invalid Request',
      detail: 'One or more parameters to your request was invalid.',
      type: 'https://api.twitter.com/2/problems/invalid-request',
    }),
  )

export function send(res: ServerResponse, status: number, body: string): void {
  res.statusCode = status
  res.setHeader('content-type', JSON_TYPE)
  res.end(body)
}

/** A JSON request body, with X's 400 for a wrong content type or text that is not JSON. */
export async function readBody(req: IncomingMessage): Promise<unknown> {
  const type = req.headers['content-type'] ?? ''
  if (!type.toLowerCase().startsWith('application/json')) {
    // Drain so the connection can be reused.
    req.resume()
    throw badBody('Requests with bodies must have content-type of application/json.')
  }
  const chunks: Buffer[] = []
  let size = 0
  for await (const chunk of req) {
    if (!Buffer.isBuffer(chunk)) continue
    size += chunk.length
    if (size > MAX_BODY)
      throw new HttpError(413, problem(413, 'Payload Too Large', 'Body too large'))
    chunks.push(chunk)
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'))
  } catch {
    throw badBody('The request body is not valid JSON.')
  }
}

export const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** What the routes share: the world, the rules and the stream hub of one simulator. */
export interface SimContext {
  world: World
  rules: RuleStore
  hub: StreamHub
  compile: RuleCompiler
  maxConnections: number
  /** Whether the stream honours `backfill_minutes` (X grants it to some access levels only). */
  grantBackfill: boolean
  /** Counts a stream connection accepted (stats). */
  connected(): void
  /** The world's withdrawals, the compliance streams' connections and the batch jobs. */
  withdrawals: Withdrawals
  compliance: ComplianceHub
  jobs: ComplianceJobs
}

export interface RouteCall<S extends ParamsSpec> {
  params: ParamsOf<S>
  req: IncomingMessage
  res: ServerResponse
  path: string
}

/** A response body, or undefined when the handler wrote the response itself (a stream). */
export type Answer = { status: number; body: string } | undefined

/** An X endpoint the simulator serves. */
export interface SimRoute {
  method: 'GET' | 'POST'
  /** The path, or a pattern for a path with an id. */
  path: string | RegExp
  /** The fault list it draws injected failures from. */
  fault: Route
  /** Its rate-limit window's key. */
  window: string
  run(
    req: IncomingMessage,
    res: ServerResponse,
    path: string,
    search: URLSearchParams,
  ): Promise<Answer>
}

/** A route whose handler gets its parameters checked and typed by its spec. */
export function defineRoute<S extends ParamsSpec>(
  route: Omit<SimRoute, 'run'> & { params: S },
  handle: (c: RouteCall<S>) => Answer | Promise<Answer>,
): SimRoute {
  return {
    method: route.method,
    path: route.path,
    fault: route.fault,
    window: route.window,
    run: async (req, res, path, search) =>
      handle({ params: parseQuery(search, route.params), req, res, path }),
  }
}
