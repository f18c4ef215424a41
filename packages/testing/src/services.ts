import { connect } from 'node:net'
import { ensureDatabase } from '@threadline/db'

export interface TestServices {
  databaseUrl: string
  redisUrl: string
  /** How they were found: explicit URLs, containers started for this run, or local ports. */
  mode: 'env' | 'containers' | 'local'
  stop(): Promise<void>
}

type Env = Record<string, string | undefined>

function probe(host: string, port: number, timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

async function containerEngineAnswers(): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined
  try {
    const { getContainerRuntimeClient } = await import('testcontainers')
    await Promise.race([
      getContainerRuntimeClient(),
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error('timeout')), 15_000)
      }),
    ])
    return true
  } catch {
    return false
  } finally {
    clearTimeout(timer)
  }
}

async function startContainers(): Promise<TestServices> {
  const [{ PostgreSqlContainer }, { RedisContainer }] = await Promise.all([
    import('@testcontainers/postgresql'),
    import('@testcontainers/redis'),
  ])
  const [pg, redis] = await Promise.all([
    new PostgreSqlContainer('postgres:15-alpine')
      .withDatabase('threadline_test')
      .withUsername('postgres')
      .withPassword('postgres')
      // Durability is not what tests measure; these make each test file's migrations fast.
      .withCommand([
        'postgres',
        '-c',
        'fsync=off',
        '-c',
        'synchronous_commit=off',
        '-c',
        'full_page_writes=off',
        '-c',
        'max_connections=300',
      ])
      .withTmpFs({ '/var/lib/postgresql/data': 'rw' })
      // Postgres runs as PID 1 and takes any orphan it reaps for a crashed backend: a health
      // check that Docker kills at its timeout (the module's is 1 s, short on a busy machine)
      // leaves one and restarts the cluster mid-run. Over TCP, so the image's first-start server
      // (socket only) does not count as ready.
      .withHealthCheck({
        test: [
          'CMD-SHELL',
          'pg_isready --host 127.0.0.1 --username postgres --dbname threadline_test',
        ],
        interval: 500,
        timeout: 60_000,
        retries: 1_000,
      })
      .start(),
    new RedisContainer('redis:7-alpine').start(),
  ])
  return {
    databaseUrl: pg.getConnectionUri(),
    redisUrl: redis.getConnectionUrl(),
    mode: 'containers',
    async stop() {
      await Promise.all([pg.stop(), redis.stop()])
    },
  }
}

/**
 * Finds Postgres and Redis for the integration suites, in this order:
 * 1. explicit `DATABASE_URL` and `REDIS_URL` (CI services, a shared dev box);
 * 2. testcontainers, when a container engine answers (a laptop or CI with Docker);
 * 3. the standard local ports 5432 and 6379 (a machine with both installed);
 * 4. otherwise a clear error that names the remedies.
 * `TEST_SERVICES=containers|local` forces one of the last two.
 */
export async function resolveTestServices(env: Env = process.env): Promise<TestServices> {
  const force = env.TEST_SERVICES
  if (env.DATABASE_URL && env.REDIS_URL) {
    await ensureDatabase(env.DATABASE_URL)
    return {
      databaseUrl: env.DATABASE_URL,
      redisUrl: env.REDIS_URL,
      mode: 'env',
      stop: async () => {},
    }
  }
  if (force !== 'local' && (force === 'containers' || (await containerEngineAnswers()))) {
    return startContainers()
  }
  const [pgUp, redisUp] = await Promise.all([probe('127.0.0.1', 5432), probe('127.0.0.1', 6379)])
  if (pgUp && redisUp) {
    const databaseUrl = 'postgres://postgres@127.0.0.1:5432/threadline_test'
    await ensureDatabase(databaseUrl)
    return { databaseUrl, redisUrl: 'redis://127.0.0.1:6379', mode: 'local', stop: async () => {} }
  }
  const missing = [!pgUp && 'Postgres on 127.0.0.1:5432', !redisUp && 'Redis on 127.0.0.1:6379']
    .filter(Boolean)
    .join(' and ')
  throw new Error(
    `No Postgres/Redis for the integration tests: no container engine answered and ${missing} ` +
      'did not answer. Either start Docker (testcontainers then runs both), start local services ' +
      '(see README, "Tests"), or set DATABASE_URL and REDIS_URL.',
  )
}
