import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyComplianceEvents, createApp } from '@threadline/db'
import { publishActivity } from '@threadline/queue'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { startTestServer, storeLines } from '@threadline/testing/api'
import { openRawStream } from '../stream/harness.js'

/**
 * The activity stream's `backfill_minutes` replay (docs/api.md §4.2) never carries a Post X
 * withdrew after its event was published (docs/api.md §7).
 */
let env: TestEnv
let api: string

beforeAll(async () => {
  env = await createTestEnv()
  api = (await startTestServer(env, {}, { listen: true })).url
})
afterAll(() => env?.close())

describe('the activity replay and withdrawals', () => {
  it('leaves out the events of Posts withdrawn since', async () => {
    const conv = generateConversation({ size: 3, seed: 4507, startMs: Date.now() - 600_000 })
    await storeLines(env.db, conv.lines)
    const app = await createApp(env.db, 'activity replay')
    const event = (id: string, uuid: string) => ({
      app_id: app.app_id,
      body: JSON.stringify({
        data: { event_uuid: uuid, event_type: 'post.create', payload: { id, text: 'x' } },
      }),
    })
    await publishActivity(
      env.redis,
      env.prefix,
      conv.ids.map((id, i) => event(id, String(i + 1))),
      600_000,
    )
    const now = new Date().toISOString()
    await applyComplianceEvents(env.db, [
      {
        kind: 'tweet',
        id: conv.ids[1]!,
        action: 'drop',
        eventAt: now,
        receivedAt: now,
        source: 'stream',
      },
    ])
    const s = await openRawStream(
      api,
      app.bearer_token,
      'backfill_minutes=5',
      env,
      '/2/activity/stream',
    )
    // The replay goes in stream order: once the last event is there, the others came before it.
    await waitFor('the replay', () => s.messages.some((m) => m.data.payload.id === conv.ids[2]))
    expect(s.messages.map((m) => m.data.payload.id)).toEqual([conv.ids[0], conv.ids[2]])
    s.close()
  })
})
