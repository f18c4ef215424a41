import pg from 'pg'

/** The same connection URL with another database name. */
export function withDatabase(url: string, database: string): string {
  const u = new URL(url)
  u.pathname = `/${database}`
  return u.toString()
}

/**
 * The same connection URL with a search_path, so that every unqualified table lives in `schema`
 * (one schema per test file; public stays on the path for extensions).
 */
export function withSearchPath(url: string, schema: string): string {
  const u = new URL(url)
  u.searchParams.set('options', `-c search_path=${schema},public`)
  return u.toString()
}

async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 10_000 })
  await client.connect()
  try {
    return await fn(client)
  } finally {
    await client.end()
  }
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`

/** Creates the database named in `url` if it does not exist (a fresh machine has none). */
export async function ensureDatabase(url: string): Promise<boolean> {
  const database = decodeURIComponent(new URL(url).pathname.slice(1))
  if (!database) return false
  try {
    await withClient(url, async () => undefined)
    return false
  } catch (err) {
    if ((err as { code?: string }).code !== '3D000') throw err // 3D000: database does not exist
  }
  await withClient(withDatabase(url, 'postgres'), async (client) => {
    await client
      .query(`CREATE DATABASE ${quoteIdent(database)}`)
      .catch((err: { code?: string }) => {
        if (err.code !== '42P04') throw err // created meanwhile by another process
      })
  })
  return true
}

export async function createSchema(url: string, schema: string): Promise<void> {
  await withClient(url, (c) => c.query(`CREATE SCHEMA IF NOT EXISTS ${quoteIdent(schema)}`))
}

export async function dropSchema(url: string, schema: string): Promise<void> {
  await withClient(url, (c) => c.query(`DROP SCHEMA IF EXISTS ${quoteIdent(schema)} CASCADE`))
}

/** Terminates every session with this application_name (fault tests, operators' tools). */
export async function terminateConnections(url: string, applicationName: string): Promise<number> {
  return withClient(url, async (c) => {
    const { rows } = await c.query(
      'SELECT count(pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1 AND pid <> pg_backend_pid()',
      [applicationName],
    )
    return (rows[0] as { n: number }).n
  })
}
