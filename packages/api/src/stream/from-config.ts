import type { Config } from '@threadline/config'
import type { FilteredStreamOptions } from '../routes/stream.js'

/** A bare `\r\n` after this long without traffic (X: 10 s; clients give up after ≈ 20 s). */
const KEEPALIVE_MS = 10_000
/** Bytes queued for one client past which it is cut off as a SlowReader (bounds memory). */
const MAX_BUFFERED_BYTES = 4 * 1024 * 1024
/** Entries per XREAD of the `stored` stream. */
const READ_BATCH = 500

/** The filtered stream's options: the connection limit from configuration, constants for the rest. */
export function filteredStreamOptionsFromConfig(config: Config): FilteredStreamOptions {
  return {
    prefix: config.REDIS_PREFIX,
    databaseUrl: config.DATABASE_URL,
    readBatch: READ_BATCH,
    keepAliveMs: KEEPALIVE_MS,
    maxConnectionsPerApp: config.API_STREAM_MAX_CONNECTIONS,
    maxBufferedBytes: MAX_BUFFERED_BYTES,
    connectionScope: 'cluster',
  }
}
