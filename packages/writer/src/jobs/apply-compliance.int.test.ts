import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { sql } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import {
  activityStreamKey,
  addComplianceBatch,
  addPostsBatch,
  createQueue,
  publishActivity,
  type ComplianceJob,
  type PostsJob,
} from '@threadline/queue'
import { storedStreamKey, unpackStored } from '@threadline/redis'
import {
  createTestEnv,
  testWorkerOptions,
  waitFor,
  workerClients,
  type TestEnv,
} from '@threadline/testing'
import { createWriter } from '../writer.js'

/**
 * The writer's `compliance` job: events queued by the ingest are applied, a deleted Post's content
 * leaves the `stored` and activity streams (the `backfill_minutes` replays), and a job that is not a list of
 * events is kept as a reject rather than retried.
 */
let env: TestEnv
let compliance: ReturnType<typeof createQueue<ComplianceJob>>
let posts: ReturnType<typeof createQueue<PostsJob>>

beforeAll(async () => {
  env = await createTestEnv()
  const writer = createWriter(workerClients(env, 'test-writer'), {
    ...testWorkerOptions,
    prefix: env.prefix,
  })
  env.defer(() => writer.close())
  await writer.start()
  const deps = { connection: env.redis, prefix: env.prefix, logger: env.logger }
  compliance = createQueue<ComplianceJob>('compliance', deps)
  posts = createQueue<PostsJob>('posts', deps)
  env.defer(() => compliance.close())
  env.defer(() => posts.close())
})
afterAll(() => env?.close())

const ID = '1861234567890123456'
const line = JSON.stringify({
  data: {
    id: ID,
    text: 'a secret about to be deleted',
    author_id: '2244994945',
    conversation_id: ID,
    created_at: '2026-11-28T10:00:00.000Z',
  },
  includes: { users: [{ id: '2244994945', name: 'X Dev', username: 'xdev' }] },
})

async function inStream(id: string): Promise<boolean> {
  const entries = await env.redis.xrange(storedStreamKey(env.prefix), '-', '+')
  return entries.some(([, fields]) => unpackStored(fields).some((e) => e.id === id))
}

describe('the compliance job', () => {
  it('erases a deleted Post in Postgres and in the stored and activity streams', async () => {
    await addPostsBatch(posts, env.redis, env.prefix, {
      source: 'stream',
      observed_at: new Date().toISOString(),
      lines: [line],
    })
    await waitFor('the Post published', () => inStream(ID))
    // An activity event carrying it, as delivery publishes one.
    const activity = JSON.stringify({ data: { event_type: 'post.create', payload: { id: ID } } })
    await publishActivity(env.redis, env.prefix, [{ app_id: '1', body: activity }], 600_000)
    const event: ComplianceEvent = {
      kind: 'tweet',
      id: ID,
      authorId: '2244994945',
      action: 'delete',
      eventAt: new Date().toISOString(),
      receivedAt: new Date().toISOString(),
      source: 'stream',
    }
    await addComplianceBatch(compliance, [event])
    await waitFor('the Post out of the stored stream', async () => !(await inStream(ID)))
    // Erased from the activity stream right after the stored stream.
    await waitFor('the Post out of the activity stream', async () => {
      const events = await env.redis.xrange(activityStreamKey(env.prefix), '-', '+')
      return !JSON.stringify(events).includes(ID)
    })
    const { rows } = await sql<{ withdrawn: string; text: string }>`
      SELECT withdrawn, text FROM posts WHERE id = ${ID}::bigint`.execute(env.db)
    expect(rows).toEqual([{ withdrawn: 'deleted', text: '' }])
    const { rows: logged } = await sql<{ n: string }>`
      SELECT count(*)::text AS n FROM compliance_log WHERE target_id = ${ID}::bigint`.execute(
      env.db,
    )
    expect(logged[0]!.n).toBe('1')
  })

  it('keeps a job that is not a list of events as a reject', async () => {
    const bad = { events: [{ kind: 'tweet', id: 'not-an-id', action: 'delete' }] }
    await compliance.add('compliance', bad as unknown as ComplianceJob, { jobId: 'compliance-bad' })
    await waitFor('the reject kept', async () => {
      const { rows } = await sql<{ reason: string }>`
        SELECT reason FROM ingest_rejects WHERE batch_id = 'compliance-bad'`.execute(env.db)
      return rows.length === 1 && rows[0]!.reason.includes('invalid compliance job')
    })
  })
})
