import { randomUUID } from 'node:crypto'
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyInstance,
  type FastifyReply,
} from 'fastify'
import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import { closeRedis, createRateLimiter, type RateLimitResult, type Redis } from '@threadline/redis'
import { once, type Service } from '@threadline/runtime'
import {
  ApiError,
  internalError,
  invalidRequest,
  notFoundRoute,
  payloadTooLarge,
  serviceUnavailable,
  tooManyRequests,
} from './errors.js'
import { createAuthenticator, type Authenticator } from './auth.js'
import { jsonBodyError } from './body-limits.js'
import { createOpenApi } from './openapi.js'
import { createPageTokens } from './page-token.js'
import { registerHealthRoutes } from './routes/health.js'
import { registerRoutes } from './routes/index.js'
import { registerOpenApiRoute } from './routes/openapi.js'
import { registerThreadRoutes } from './routes/threads.js'

import type { ApiDeps, ApiOptions } from './types.js'

export type * from './types.js'

export interface ApiServer extends Service {
  app: FastifyInstance
  /** The listening address once started (`http://host:port`). */
  url(): string
  /** Bearer-token lookups made so far. */
  tokenLookups: Authenticator['stats']
}

/**
 * How long a client has to send a whole request, headers and body: a client that announces a body
 * and trickles it is cut (408) instead of holding its connection. Streams are unaffected: their
 * request ends with its headers.
 */
const REQUEST_TIMEOUT_MS = 30_000

/** How long in-flight requests may run on after close() before their connections are closed. */
const CLOSE_GRACE_MS = 3_000

/** Postgres and network failures that mean "try again later" rather than a bug. */
function isUnavailable(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null
  const code = typeof e?.code === 'string' ? e.code : ''
  if (/^(08|53|57)/.test(code)) return true
  if (['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE'].includes(code)) return true
  return typeof e?.message === 'string' && /timeout exceeded|Connection terminated/i.test(e.message)
}

/** The Fastify instance with the server's limits; bodies are read as text for the routes to parse. */
function createApp(options: ApiOptions, log: Logger): FastifyInstance {
  const requestTimeout = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS
  const app = Fastify({
    requestTimeout,
    // Node checks the deadline on this interval (30 s by default, which would double it).
    http: {
      requestTimeout,
      headersTimeout: requestTimeout,
      connectionsCheckingInterval: Math.min(Math.max(requestTimeout / 4, 100), 5_000),
    },
    loggerInstance: log as FastifyBaseLogger,
    // Requests are logged once, by registerRequestLog (with the app and the route).
    logController: new LogController({ disableRequestLogging: true }),
    bodyLimit: options.bodyLimit,
    genReqId: (req) => {
      const given = req.headers['x-request-id']
      return typeof given === 'string' && /^[\w.-]{1,64}$/.test(given) ? given : randomUUID()
    },
    routerOptions: {
      ignoreTrailingSlash: true,
      maxParamLength: 500,
      // Query strings are parsed per endpoint by parseParams (duplicates must be seen, not merged).
      querystringParser: () => ({}),
    },
    return503OnClosing: true,
    // The client's address (rate budgets) from X-Forwarded-For, believed only from these proxies.
    trustProxy: options.trustedProxies?.length ? options.trustedProxies : false,
  })

  // Bodies are read as text and parsed by the route, so every failure gets X's message.
  app.removeAllContentTypeParsers()
  // JSON bodies that nest too deep or hold NUL are refused here, before any route parses them.
  app.addContentTypeParser('*', { parseAs: 'string' }, (req, body, done) => {
    const text = String(body)
    const refused = jsonBodyError(req.headers['content-type'], text)
    if (refused) done(refused)
    else done(null, text)
  })
  return app
}

/**
 * Authentication and rate limits of every `/2/` endpoint, in one onRequest hook: the bearer token
 * names the app, the endpoint's group its limit. Every response carries the rate-limit headers.
 */
function registerAuthAndRateLimit(
  app: FastifyInstance,
  deps: { db: Db; redis: Redis; log: Logger; options: ApiOptions },
): Authenticator['stats'] {
  const { log, options } = deps
  const limiter = createRateLimiter(deps.redis, { prefix: options.prefix })
  const authenticate = createAuthenticator(deps.db, options.tokenCacheMs)

  const applyRate = (reply: FastifyReply, r: RateLimitResult) => {
    reply.header('x-rate-limit-limit', r.limit)
    reply.header('x-rate-limit-remaining', r.remaining)
    reply.header('x-rate-limit-reset', r.reset)
  }

  const windowReset = (t: number) =>
    Math.ceil((t - (t % limiter.windowMs) + limiter.windowMs) / 1000)

  /** Counts one request; never rejects (Redis trouble lets the request through, logged). */
  const countRequest = async (
    name: string,
    subject: string,
    limit: number,
    reqId: string,
  ): Promise<RateLimitResult> => {
    let timer: NodeJS.Timeout | undefined
    try {
      return await Promise.race([
        limiter.hit(name, subject, limit),
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error('rate limiter timed out')), 1_000)
        }),
      ])
    } catch (err) {
      log.warn({ err, reqId }, 'rate limiter unavailable; request allowed')
      return { limit, remaining: limit, reset: windowReset(Date.now()), allowed: true }
    } finally {
      clearTimeout(timer)
    }
  }

  limiter.onError((err) => log.warn({ err }, 'rate limit count not stored in Redis'))

  /** Every response carries the rate-limit headers; those not counted show a full window. */
  const applyFullWindow = (reply: FastifyReply) => {
    const limit = options.rateLimits.lookup
    applyRate(reply, { limit, remaining: limit, reset: windowReset(Date.now()), allowed: true })
  }

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
    const endpoint = request.routeOptions.config?.endpoint
    if (!endpoint) return applyFullWindow(reply)
    const auth = await authenticate(request.headers.authorization, request.ip)
    if ('refused' in auth) {
      applyFullWindow(reply)
      throw auth.refused
    }
    const client = auth.app
    request.client = client
    const limit = options.rateLimits[endpoint.group]
    const result =
      limiter.hitKnown(endpoint.name, client.token_id, limit) ??
      (await countRequest(endpoint.name, client.token_id, limit, request.id))
    applyRate(reply, result)
    if (!result.allowed) throw tooManyRequests()
  })
  return authenticate.stats
}

/**
 * Per-request log lines are debug; the hook costs nothing unless that level is on (failures are
 * logged by the error handler at any level).
 */
function registerRequestLog(app: FastifyInstance, log: Logger): void {
  if (!log.isLevelEnabled('debug')) return
  app.addHook('onResponse', async (request, reply) => {
    log.debug(
      {
        reqId: request.id,
        method: request.method,
        route: request.routeOptions.url ?? 'unknown',
        status: reply.statusCode,
        ms: Math.round(reply.elapsedTime),
        app: request.client?.app_id,
      },
      'request',
    )
  })
}

/** Every failure answers in X's error shape: a bad request a 4xx, a dependency away a 503. */
function registerErrorHandlers(app: FastifyInstance, log: Logger): void {
  app.setNotFoundHandler(async () => {
    throw notFoundRoute()
  })

  app.setErrorHandler(async (err, request, reply) => {
    let apiError: ApiError
    const e = err as { code?: string; statusCode?: number }
    if (err instanceof ApiError) apiError = err
    else if (e.code === 'FST_ERR_CTP_BODY_TOO_LARGE') apiError = payloadTooLarge()
    else if (e.code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE') {
      apiError = invalidRequest(
        'body',
        [],
        'Requests with bodies must have content-type of application/json.',
      )
    } else if (typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
      apiError =
        e.statusCode === 413
          ? payloadTooLarge()
          : invalidRequest('request', [], 'The request could not be read.')
    } else if (isUnavailable(err)) {
      log.warn({ err, reqId: request.id }, 'dependency unavailable')
      apiError = serviceUnavailable()
    } else {
      log.error({ err, reqId: request.id }, 'request failed')
      apiError = internalError()
    }
    return reply.status(apiError.status).send(apiError.body)
  })
}

/**
 * The read API: a pure factory over its clients. Nothing listens until `start()`; `close()` stops
 * listening, then releases Postgres and Redis.
 */
export function buildServer(deps: ApiDeps, options: ApiOptions): ApiServer {
  const { db, redis } = deps
  const readDb = deps.readDb ?? db
  const log = deps.logger.child({ component: 'api' })
  const now = options.now ?? (() => new Date())
  const pageTokens = createPageTokens(deps.tokenSecrets.current, deps.tokenSecrets.previous)

  const app = createApp(options, log)
  const tokenLookups = registerAuthAndRateLimit(app, { db, redis, log, options })
  registerRequestLog(app, log)
  registerErrorHandlers(app, log)

  const openApi = createOpenApi()
  app.addHook('onRoute', openApi.onRoute)
  const ctx = { db, readDb, log, options, now, pageTokens }
  registerRoutes(app, ctx, {
    redis,
    prefix: options.prefix,
    activity: options.activity,
    compliance: options.compliance,
  })
  registerThreadRoutes(app)

  registerHealthRoutes(app, { db, readDb, redis, log })
  registerOpenApiRoute(app, openApi)

  let address = ''
  return {
    app,
    url: () => address,
    tokenLookups,
    async start() {
      address = await app.listen({ host: options.host, port: options.port })
      log.info({ address }, 'api listening')
    },
    close: once(async () => {
      // In-flight requests get a grace period; then every remaining connection is closed. Without
      // it, a connection that never sent a request (a client's or a load balancer's pre-connect)
      // is not "idle" to Node and holds the close open until its keep-alive timeout (72 s).
      const force = setTimeout(() => app.server.closeAllConnections(), CLOSE_GRACE_MS)
      try {
        await app.close()
      } finally {
        clearTimeout(force)
      }
      await closeRedis(redis)
      await db.destroy()
      if (readDb !== db) await readDb.destroy()
      log.info('api closed')
    }),
  }
}
