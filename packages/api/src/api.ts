import type { ApiMetrics } from '@threadline/metrics'
import { instrumentHttp } from './metrics.js'
import {
  registerConversationStream,
  type ConversationStreamOptions,
} from './routes/conversation-stream.js'
import { registerFilteredStream, type FilteredStreamOptions } from './routes/stream.js'
import { buildServer, type ApiServer } from './server.js'
import type { ActivityApiOptions } from './activity/options.js'
import type { ApiDeps, ApiOptions, ComplianceApiOptions } from './types.js'

/** The API role's options: the server's, the filtered stream's and the conversation feed's. */
export interface ApiRoleOptions {
  server: ApiOptions
  stream: FilteredStreamOptions
  conversationStream: ConversationStreamOptions
}

export interface ApiRoleDeps extends ApiDeps {
  /** Counts requests and open streams when given. */
  metrics?: ApiMetrics
}

/**
 * The API role: the read API with the filtered stream and the conversation feed on it, instrumented
 * when metrics are given. Closing it closes the clients in `deps`.
 */
export function createApi(deps: ApiRoleDeps, options: ApiRoleOptions): ApiServer {
  const server = buildServer(deps, options.server)
  const stream = registerFilteredStream(server.app, {
    db: deps.db,
    redis: deps.redis,
    logger: deps.logger,
    options: options.stream,
  })
  registerConversationStream(server.app, stream, options.conversationStream)
  if (deps.metrics) {
    instrumentHttp(server.app, deps.metrics)
    deps.metrics.tokenLookups(server.tokenLookups)
  }
  return server
}

/** Changes to the options configuration gives: timings, buffers, the clock (tests and the CLI's tests). */
export interface ApiOverrides {
  server?: Partial<ApiOptions>
  stream?: Partial<FilteredStreamOptions>
  activity?: Partial<ActivityApiOptions>
  compliance?: Partial<ComplianceApiOptions>
}

/** `options` with `overrides` applied, each part merged on its own. */
export function withApiOverrides(options: ApiRoleOptions, overrides: ApiOverrides): ApiRoleOptions {
  const server = { ...options.server, ...overrides.server }
  return {
    server: {
      ...server,
      activity: { ...server.activity, ...overrides.activity },
      compliance: { ...server.compliance, ...overrides.compliance },
    },
    stream: { ...options.stream, ...overrides.stream },
    conversationStream: options.conversationStream,
  }
}
