import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { loadConfig } from '@threadline/config'
import { sql } from '@threadline/db'
import { withDeadline } from '@threadline/runtime'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { apiFromConfig } from './from-config.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('stopping the API', () => {
  it('ends promptly when Redis has not answered since the start', async () => {
    // Nothing listens on port 1. The filtered stream's hub waits, in the server's start, for the
    // stored stream's tail; Fastify's close waits for the start: the two waited on each other
    // until the process's shutdown watchdog (20 s, exit 1).
    const config = loadConfig({ ...env.env, REDIS_URL: 'redis://127.0.0.1:1', PORT: '0' })
    const server = await apiFromConfig(config, env.logger)
    const starting = server.start()
    starting.catch(() => {})
    // The hub has begun: its LISTEN connection to Postgres is open (the tail waits on Redis).
    await waitFor('the stream hub started', async () => {
      const { rows } = await sql<{ n: number }>`SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE application_name = 'threadline-api-stream'`.execute(env.db)
      return rows[0]!.n > 0
    })
    await withDeadline(8_000, 'api close', () => server.close())
    // The start settles as well (its wait ended with the close); nothing is left listening.
    await withDeadline(2_000, 'api start', () => starting.catch(() => undefined))
    expect(server.app.server.listening).toBe(false)
  })
})
