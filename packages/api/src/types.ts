import type { Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Redis } from '@threadline/redis'
import type { ActivityApiOptions } from './activity/options.js'
import type { ComplianceJobOptions } from './compliance/checker.js'
import type { PageTokens } from './page-token.js'
import type { EndpointParams } from './params.js'

export type RateGroup = 'lookup' | 'search' | 'counts' | 'rules'

export interface ApiOptions {
  host: string
  port: number
  /** Redis key prefix for rate-limit windows. */
  prefix: string
  rateLimits: Record<RateGroup, number>
  ruleCap: number
  queryMaxLength: number
  bodyLimit: number
  tokenCacheMs: number
  /** Proxies (addresses or CIDR ranges) whose X-Forwarded-For names the client (API_TRUSTED_PROXIES). */
  trustedProxies?: string[]
  /** How long a client may take to send a whole request (a default when absent). */
  requestTimeoutMs?: number
  /** The search backfills use (UPSTREAM_SEARCH), shown for those not started yet; default recent. */
  backfillSource?: 'recent' | 'all'
  /** The clock, for tests of time windows. */
  now?: () => Date
  /** Activity subscriptions, webhooks and the activity stream (defaults when absent). */
  activity?: Partial<ActivityApiOptions>
  /** Batch compliance jobs and the compliance streams (defaults when absent). */
  compliance?: Partial<ComplianceApiOptions>
}

export interface ComplianceApiOptions extends ComplianceJobOptions {
  /** How often the compliance log is polled for the open compliance streams. */
  logPollMs: number
  /** Open connections per app to each compliance stream and partition. */
  streamMaxConnections: number
  /** A bare `\r\n` after this long without traffic. */
  keepAliveMs: number
  /** Per-connection send buffer past which the reader is cut off as SlowReader. */
  maxBufferedBytes: number
}

export interface ApiDeps {
  /** The primary: rules, apps, subscriptions and webhooks (read-your-writes), and Post reads by default. */
  db: Db
  /**
   * A streaming replica for Post reads (lookup, search, counts), which tolerate its lag of a moment;
   * anything an app writes is read back from the primary. The server closes it.
   */
  readDb?: Db
  /** A producer-style connection (fails fast); the server closes it. */
  redis: Redis
  logger: Logger
  /**
   * `current` signs pagination tokens; `previous`, the secret before the last rotation, still
   * verifies them and signs none.
   */
  tokenSecrets: { current: string; previous?: string }
}

export interface AuthedApp {
  app_id: string
  token_id: string
}

declare module 'fastify' {
  interface FastifyRequest {
    client?: AuthedApp
  }
  interface FastifyContextConfig {
    /** The rate-limit bucket and OpenAPI operation of a `/2/` route. */
    endpoint?: { name: string; group: RateGroup; params: EndpointParams; summary: string }
    /** A route authorized by a signed token in its URL, not a bearer token (docs/api.md §8.1). */
    signedUrl?: { name: string; params: EndpointParams; summary: string }
  }
}

export type ServerContext = {
  db: Db
  /** Where Posts are read from: the replica when one is configured, else `db`. */
  readDb: Db
  log: Logger
  options: ApiOptions
  now: () => Date
  pageTokens: PageTokens
}
