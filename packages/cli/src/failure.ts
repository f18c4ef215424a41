import type { Config } from '@threadline/config'
import { waitForRedis, type Redis, type RedisSettings } from '@threadline/redis'

/** A URL's host and port, without its credentials (the default port when it names none). */
function endpoint(url: string, defaultPort: number): { host: string; port: string } {
  try {
    const u = new URL(url)
    return { host: u.hostname, port: u.port || String(defaultPort) }
  } catch {
    return { host: '(unparsable URL)', port: '' }
  }
}

/** The user a URL names (never its password); libpq's default is the OS user. */
function userOf(url: string): string {
  try {
    return decodeURIComponent(new URL(url).username) || '(the OS user)'
  } catch {
    return '(unparsable URL)'
  }
}

const hostPort = ({ host, port }: { host: string; port: string }) => `${host}:${port}`

/** Where this configuration says Redis is: the cluster's seeds, or REDIS_URL's host and port. */
export function redisWhere(config: RedisSettings): string {
  const nodes = config.REDIS_CLUSTER_NODES
  if (nodes && nodes.length > 0) {
    return `${nodes.map((n) => `${n.host}:${n.port}`).join(',')} (REDIS_CLUSTER_NODES)`
  }
  return `${hostPort(endpoint(config.REDIS_URL, 6379))} (REDIS_URL)`
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
])

/**
 * What a command-line user reads when a command fails: the error's message, with what to check
 * when it is one of the failures a setup runs into first (Postgres not reachable where
 * DATABASE_URL says, a database that `migrate` has not created yet).
 */
export function describeFailure(
  error: unknown,
  config: Pick<Config, 'DATABASE_URL'> | undefined,
): string {
  const e = error as { message?: string; code?: string; address?: string; port?: number }
  const message = e.message ?? String(error)
  if (config && e.code === '3D000') {
    return `${message}: run "threadline migrate" (it creates the database), or check DATABASE_URL`
  }
  if (config && (e.code === '28P01' || e.code === '28000')) {
    const db = endpoint(config.DATABASE_URL, 5432)
    const user = userOf(config.DATABASE_URL)
    return (
      `Postgres at ${hostPort(db)} refused user "${user}" (DATABASE_URL): ${message}. Put the ` +
      'right user and password in DATABASE_URL (postgres://USER:PASSWORD@host:port/threadline), ' +
      "or let that user in through the server's pg_hba.conf (trust on a development machine)"
    )
  }
  if (config && e.code && NETWORK_CODES.has(e.code)) {
    const db = endpoint(config.DATABASE_URL, 5432)
    // pg reports the address it tried (a name resolved: `localhost` is 127.0.0.1 or ::1), so the
    // port tells; a name that did not resolve has no address at all.
    if (e.port === undefined || String(e.port) === db.port) {
      return `cannot reach Postgres at ${hostPort(db)} (DATABASE_URL): ${message}`
    }
  }
  return message
}

/**
 * For one-shot commands: Redis answers within `ms`, or an error that says where it was looked
 * for. Services reconnect forever instead (a Redis restart must not stop them); a command that
 * waited the same way would hang with nothing but reconnect warnings to show for it.
 */
export async function reachRedis(redis: Redis, config: RedisSettings, ms = 5_000): Promise<void> {
  let last: Error | undefined
  const onError = (err: Error) => {
    last = err
  }
  redis.on('error', onError)
  try {
    await waitForRedis(redis, ms)
  } catch (err) {
    throw new Error(
      `cannot reach Redis at ${redisWhere(config)}: ${(last ?? (err as Error)).message}`,
    )
  } finally {
    redis.off('error', onError)
  }
}
