import { onTestFinished } from 'vitest'
import { startTestWriter } from '../support/writer.js'
import { createDb, sql } from '@threadline/db'
import { createIngest, type Ingest, type IngestOptions, type StreamEvent } from '@threadline/ingest'
import { createRedis } from '@threadline/redis'
import type { TestEnv } from '@threadline/testing'
import type { Writer } from '@threadline/writer'

/** Every duration shrunk so that faults are survived in test time. */
export function fastOptions(
  upstreamUrl: string,
  overrides: Partial<IngestOptions> = {},
): IngestOptions {
  return {
    upstreamUrl,
    search: 'recent',
    batchMaxItems: 50,
    reconcileMs: 500,
    rulesDebounceMs: 20,
    stallMs: 1_000,
    backfillMinutes: 2,
    noRulesRetryMs: 200,
    backoff: {
      networkStepMs: 20,
      networkMaxMs: 200,
      httpMs: 50,
      httpMaxMs: 400,
      rateLimitMs: 100,
      rateLimitMaxMs: 3_000,
    },
    leaseMs: 1_500,
    backfillConcurrency: 2,
    backfillMaxWaitMs: 3_000,
    shutdownTimeoutMs: 3_000,
    ...overrides,
  }
}

/** An ingest with its own clients (it closes them), closed at teardown if the test did not. */
export async function startIngest(
  env: TestEnv,
  options: IngestOptions,
  name = 'ingest',
): Promise<{ ingest: Ingest; events: StreamEvent[] }> {
  const ingest = createIngest(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 4, applicationName: `${env.schema}-${name}` }),
      databaseUrl: env.databaseUrl,
      redis: createRedis(env.redisUrl, 'producer', name),
      workerRedis: createRedis(env.redisUrl, 'worker', `${name}-backfill`),
      prefix: env.prefix,
      logger: env.logger,
    },
    options,
  )
  // Closed when the test ends, passed or failed: a failed test that kept the stream lease would
  // make the next one time out waiting for a connection.
  onTestFinished(() => ingest.close())
  // Recorded from the start, so that no event is missed between start and a test's first look.
  const events: StreamEvent[] = []
  ingest.onStreamEvent((e) => events.push(e))
  await ingest.start()
  return { ingest, events }
}

/** The real writer, on its own clients. */
export const startWriter = (env: TestEnv): Promise<Writer> => startTestWriter(env)

/** Stored Post ids of a conversation, ascending. */
export async function storedIds(env: TestEnv, conversationId: string): Promise<string[]> {
  const rows = await env.db
    .selectFrom('posts')
    .select('id')
    .where('conversation_id', '=', conversationId)
    .orderBy('id')
    .execute()
  return rows.map((r) => r.id)
}

export async function conversationRow(env: TestEnv, id: string) {
  const { rows } = await sql<{ post_count: number; root_post_id: string | null }>`
    SELECT post_count, root_post_id FROM conversations WHERE id = ${id}`.execute(env.db)
  return rows[0]
}
