import { timingSafeEqual } from 'node:crypto'
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { Logger } from '@threadline/logger'
import { InvalidRequestError } from '../params.js'
import type { RateLimits } from '../rate-limit.js'
import type { PendingFailure } from '../stream.js'
import { admin, type AdminDeps } from './admin.js'
import { complianceJobRoutes } from './compliance-jobs.js'
import { complianceStreamRoutes } from './compliance-stream.js'
import { complianceTransfer } from './compliance-transfer.js'
import { lookupRoutes } from './lookup.js'
import { HttpError, problem, send, type SimContext, type SimRoute } from './route.js'
import { rulesRoutes } from './rules.js'
import { searchRoutes } from './search.js'
import { streamRoutes } from './stream.js'

export interface RouterDeps {
  /** What the routes share, and what `/_sim/*` reads and makes. */
  ctx: AdminDeps
  /** The bearer token every X endpoint requires. */
  token: Buffer
  limits: RateLimits
  logger: Logger
}

/** X's endpoints the simulator serves, each resource's from its own file. */
function xRoutes(ctx: SimContext): SimRoute[] {
  return [
    ...rulesRoutes(ctx),
    ...streamRoutes(ctx),
    ...searchRoutes(ctx),
    ...lookupRoutes(ctx),
    ...complianceStreamRoutes(ctx),
    ...complianceJobRoutes(ctx),
  ]
}

/**
 * The simulator's request handler: the signed transfer URLs, then the bearer token, `/_sim/*`, and
 * X's endpoints with their rate limits and injected failures; errors answered as X does.
 */
export function createRouter(
  deps: RouterDeps,
): (req: IncomingMessage, res: ServerResponse) => void {
  const { ctx, limits } = deps
  const routes = xRoutes(ctx)
  const routeOf = (method: string, path: string) =>
    routes.find(
      (r) =>
        r.method === method && (typeof r.path === 'string' ? r.path === path : r.path.test(path)),
    )

  async function handle(req: IncomingMessage, res: ServerResponse) {
    const method = req.method ?? 'GET'
    const u = new URL(req.url ?? '/', 'http://simulator')
    const path = u.pathname.replace(/\/+$/, '') || '/'
    // Signed transfer URLs of batch compliance jobs: no bearer token, as on X.
    if (await complianceTransfer(ctx.jobs, req, res, path, u.searchParams)) return
    if (!authorized(req, deps.token)) {
      req.resume()
      return send(res, 401, problem(401, 'Unauthorized', 'Unauthorized'))
    }
    if (path.startsWith('/_sim/')) {
      const { status, body } = await admin(ctx, req, path)
      return send(res, status, JSON.stringify(body))
    }
    const route = routeOf(method, path)
    if (!route) {
      req.resume()
      return send(res, 404, problem(404, 'Not Found Error', 'Not Found'))
    }
    const within = limits.take(res, route.window)
    const failure = ctx.hub.takeFailure(route.fault)
    if (failure) {
      req.resume()
      return sendFailure(res, failure)
    }
    if (!within) {
      req.resume()
      return send(res, 429, problem(429, 'Too Many Requests', 'Too Many Requests'))
    }
    const answer = await route.run(req, res, path, u.searchParams)
    if (answer) send(res, answer.status, answer.body)
  }

  return (req, res) => {
    handle(req, res).catch((err: unknown) => sendError(res, err, deps.logger))
  }
}

function authorized(req: IncomingMessage, token: Buffer): boolean {
  const header = req.headers.authorization ?? ''
  const m = /^Bearer (.+)$/.exec(header)
  if (!m) return false
  const given = Buffer.from(m[1]!)
  return given.length === token.length && timingSafeEqual(given, token)
}

/** An injected failure: a 429 with its reset time, or the status asked for. */
function sendFailure(res: ServerResponse, failure: PendingFailure): void {
  if (failure.status === 429) {
    res.setHeader('x-rate-limit-remaining', '0')
    res.setHeader('x-rate-limit-reset', String(Math.ceil(Date.now() / 1000) + failure.resetSeconds))
    return send(res, 429, problem(429, 'Too Many Requests', 'Too Many Requests'))
  }
  send(res, failure.status, problem(failure.status, 'Service Unavailable', 'Injected failure'))
}

/** A request that threw: X's 400 for bad parameters, the error's own answer, else a 500. */
function sendError(res: ServerResponse, err: unknown, logger: Logger): void {
  if (res.headersSent) {
    res.destroy()
    return
  }
  if (err instanceof InvalidRequestError) {
    return send(
      res,
      400,
      JSON.stringify({
        errors: err.errors,
        title: 'Invalid Request',
        detail: 'One or more parameters to your request was invalid.',
        type: 'https://api.twitter.com/2/problems/invalid-request',
      }),
    )
  }
  if (err instanceof HttpError) return send(res, err.status, err.body)
  logger.error({ err }, 'request failed')
  send(res, 500, problem(500, 'Internal Server Error', 'Internal Server Error'))
}
