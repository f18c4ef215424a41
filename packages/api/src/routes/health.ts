import type { FastifyInstance } from 'fastify'
import { sql, type Db } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import type { Redis } from '@threadline/redis'
import { serviceUnavailable } from '../errors.js'

/** `/health` (the process answers) and `/ready` (Postgres, the replica and Redis answer too). */
export function registerHealthRoutes(
  app: FastifyInstance,
  deps: { db: Db; readDb: Db; redis: Redis; log: Logger },
): void {
  const { db, readDb, redis, log } = deps
  app.get('/health', async () => ({ status: 'ok' }))
  app.get('/ready', async (_request, reply) => {
    try {
      await Promise.race([
        Promise.all([
          sql`SELECT 1`.execute(db),
          readDb === db ? undefined : sql`SELECT 1`.execute(readDb),
          redis.ping(),
        ]),
        new Promise((_, reject) => setTimeout(() => reject(new Error('timeout')), 2_000).unref()),
      ])
      return { status: 'ready' }
    } catch (err) {
      log.warn({ err }, 'not ready')
      const e = serviceUnavailable()
      return reply.status(e.status).send(e.body)
    }
  })
}
