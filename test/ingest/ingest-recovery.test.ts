import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addRules, createApp } from '@threadline/db'
import { snowflakeAt, snowflakeTime } from '@threadline/domain'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { FakeUpstream } from './fake-upstream.js'
import { conversationRow, fastOptions, startIngest, startWriter, storedIds } from './harness.js'

/**
 * Never a gap (docs/architecture.md, "Recovery"): an upstream that drops what it sends while no
 * client is connected and refuses `backfill_minutes`, as X does for most access levels; the Posts
 * of every window come back by search from the stream's mark, after a reconnect and a takeover.
 */
let env: TestEnv

beforeAll(async () => {
  env = await createTestEnv()
  await startWriter(env)
})
afterAll(() => env?.close())

async function xLikeUpstream(): Promise<FakeUpstream> {
  const fake = new FakeUpstream()
  fake.keepAliveMs = 100
  fake.grantBackfill = false
  fake.pageSize = 4
  await fake.start()
  env.defer(() => fake.close())
  return fake
}

/** A fresh start: no rules, no mark, no memory of a refusal. */
async function clean() {
  await env.db.deleteFrom('stream_rules').execute()
  await env.db.deleteFrom('upstream_rules').execute()
  await env.redis.del(`${env.prefix}:ingest:mark`, `${env.prefix}:ingest:backfill-refused`)
}

const recoverySearches = (fake: FakeUpstream) =>
  fake.requests.filter((r) => r.path.startsWith('/2/tweets/search/') && r.query.since_id)

/** Every Post of `ids` stored once: the conversation's ids and its counter agree. */
async function allStored(conversationId: string, ids: readonly string[], what: string) {
  await waitFor(what, async () => (await storedIds(env, conversationId)).length === ids.length, {
    timeoutMs: 20_000,
  })
  expect(await storedIds(env, conversationId)).toEqual([...ids].sort())
  expect((await conversationRow(env, conversationId))?.post_count).toBe(ids.length)
}

describe('recovery of what the stream missed', () => {
  it('recovers a reconnect by search when backfill_minutes is refused, and stops asking for it', async () => {
    await clean()
    const conv = generateConversation({ size: 30, seed: 41, startMs: Date.now() - 120_000 })
    const fake = await xLikeUpstream()
    // The history stays out of search until published, so only the window's search finds it.
    const { events } = await startIngest(env, fastOptions(fake.url, { backfillMinutes: 2 }))
    const app = (await createApp(env.db, 'recovery-a')).app_id
    await addRules(env.db, app, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    await waitFor('a stream open', () => fake.openStreams === 1)
    const live = conv.lines.slice(0, 10)
    for (const line of live) fake.publish(line)
    await allStored(conv.rootId, conv.ids.slice(0, 10), 'the live Posts stored')

    // Cut, and published before the ingest can be back: no client hears these.
    fake.cut()
    for (const line of conv.lines.slice(10, 20)) fake.publish(line)
    await allStored(conv.rootId, conv.ids.slice(0, 20), 'the window recovered')
    const refused = fake.connections.filter((c) => c.backfill_minutes !== undefined)
    expect(refused, 'backfill_minutes asked for once, then never again').toHaveLength(1)
    expect(
      events.some((e) => e.type === 'disconnected' && e.reason.startsWith('400')),
      'the refusal seen',
    ).toBe(true)
    const searches = recoverySearches(fake)
    expect(searches.length).toBeGreaterThan(0)
    // From the mark (the newest Post queued) less the 10-second margin.
    const markMs = snowflakeTime(conv.ids[9]!)!.getTime()
    expect(searches.map((s) => s.query.since_id)).toContain(snowflakeAt(new Date(markMs - 10_000)))

    // A second gap: no backfill_minutes asked, recovered by search again.
    const searchesBefore = searches.length
    fake.cut()
    for (const line of conv.lines.slice(20)) fake.publish(line)
    await allStored(conv.rootId, conv.ids, 'the second window recovered')
    expect(fake.connections.filter((c) => c.backfill_minutes !== undefined)).toHaveLength(1)
    expect(recoverySearches(fake).length).toBeGreaterThan(searchesBefore)
  })

  it('a standby that takes the lease recovers the window from the mark', async () => {
    await clean()
    const conv = generateConversation({ size: 24, seed: 43, startMs: Date.now() - 120_000 })
    const fake = await xLikeUpstream()
    const options = fastOptions(fake.url, { backfillMinutes: 2 })
    const first = await startIngest(env, options, 'leader')
    const app = (await createApp(env.db, 'recovery-b')).app_id
    await addRules(env.db, app, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    await waitFor('a stream open', () => fake.openStreams === 1 && first.ingest.stats().leader)
    const standby = await startIngest(env, options, 'standby')
    for (const line of conv.lines.slice(0, 12)) fake.publish(line)
    await allStored(conv.rootId, conv.ids.slice(0, 12), 'the live Posts stored')
    const searchesBefore = recoverySearches(fake).length

    // The leader goes; what is published before the standby connects reaches no one.
    await first.ingest.close()
    for (const line of conv.lines.slice(12)) fake.publish(line)
    await waitFor('the standby leading', () => standby.ingest.stats().leader)
    await allStored(conv.rootId, conv.ids, 'the takeover window recovered')
    expect(recoverySearches(fake).length).toBeGreaterThan(searchesBefore)
  })
})
