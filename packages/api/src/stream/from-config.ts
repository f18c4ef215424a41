import type { Config } from '@threadline/config'
import type { FilteredStreamOptions } from './route.js'

/** The filtered stream's options from configuration (API_STREAM_*). */
export function filteredStreamOptions(config: Config): FilteredStreamOptions {
  return {
    prefix: config.QUEUE_PREFIX,
    databaseUrl: config.DATABASE_URL,
    readBatch: config.API_STREAM_READ_BATCH,
    keepAliveMs: config.API_STREAM_KEEPALIVE_MS,
    maxConnectionsPerApp: config.API_STREAM_MAX_CONNECTIONS,
    maxBufferedBytes: config.API_STREAM_MAX_BUFFER_BYTES,
    connectionScope: config.API_STREAM_CONNECTION_SCOPE,
  }
}
