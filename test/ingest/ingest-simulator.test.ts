import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addRules, createApp, deleteRules, getBackfill } from '@threadline/db'
import { createSimulator, type Simulator } from '@threadline/simulator'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { conversationRow, fastOptions, startIngest, startWriter, storedIds } from './harness.js'

/**
 * The ingest end to end against the simulator (X's wire protocol, faults on demand): a rule added
 * is placed upstream, the conversation's history arrives by backfill and its live replies by the
 * stream, through 429s, disconnects, silence, malformed, duplicated and reordered lines; nothing
 * missing, nothing doubled.
 */
const TOKEN = 'sim-token'
let env: TestEnv
let sim: Simulator

beforeAll(async () => {
  env = await createTestEnv()
  sim = createSimulator({
    port: 0,
    rate: 0,
    seed: 21,
    bearerToken: TOKEN,
    keepAliveMs: 100,
    recordDeliveries: true,
    world: { users: 200, historyPosts: 3_000, demoConversations: 2 },
  })
  await sim.start()
  env.defer(() => sim.close())
  await startWriter(env)
})
afterAll(() => env?.close())

async function upstreamRuleValues(): Promise<string[]> {
  const res = await fetch(`${sim.url}/2/tweets/search/stream/rules`, {
    headers: { authorization: `Bearer ${TOKEN}` },
  })
  const body = (await res.json()) as { data?: Array<{ value: string }> }
  return (body.data ?? []).map((r) => r.value).sort()
}

describe('ingest against the simulator', () => {
  it('follows a conversation: history by backfill, live replies through faults, rule removed at the end', async () => {
    const conversationId = sim.demoConversations()[0]!
    const expected = () =>
      sim.world
        .conversation(conversationId)!
        .map((p) => p.id)
        .sort()
    expect(expected().length).toBeGreaterThan(0)

    sim.faults.failNext(1, { status: 429, resetSeconds: 1 })
    const { ingest, events } = await startIngest(
      env,
      fastOptions(sim.url, {
        upstreamBearerToken: TOKEN,
        stallMs: 800,
        backfillMinutes: 1,
        // The whole history: `recent` would stop at the 7-day window (the root still comes by id).
        search: 'all',
      }),
    )
    const connected = () => events.filter((e) => e.type === 'connected').length
    const app = (await createApp(env.db, 'sim')).app_id
    const value = `conversation_id:${conversationId}`
    await addRules(env.db, app, [{ value }], { cap: 1000 })

    await waitFor(
      'the rule placed upstream',
      async () => (await upstreamRuleValues()).includes(value),
      {
        timeoutMs: 5_000,
      },
    )
    await waitFor(
      'the backfill done',
      async () => (await getBackfill(env.db, conversationId))?.status === 'done',
    )
    await waitFor(
      'the history stored',
      async () => (await storedIds(env, conversationId)).length === expected().length,
    )
    expect(await storedIds(env, conversationId)).toEqual(expected())

    // The first connect met the injected 429; the next one held.
    await waitFor(
      'a stream after the 429',
      () => connected() >= 1 && sim.stats().streamConnections === 1,
    )
    expect(events.some((e) => e.type === 'disconnected' && e.failure?.kind === 'rate-limit')).toBe(
      true,
    )

    const replies = async (n: number) => {
      for (let i = 0; i < n; i++) sim.reply(conversationId)
      await waitFor(
        `${expected().length} Posts stored`,
        async () => (await storedIds(env, conversationId)).length === expected().length,
      )
    }
    await replies(10)

    // In-stream disconnect, then a cut socket.
    const n1 = connected()
    sim.faults.dropStreams({ graceful: true })
    await waitFor(
      'a reconnection after the disconnect',
      () => connected() > n1 && sim.stats().streamConnections === 1,
    )
    await replies(5)
    const n2 = connected()
    sim.faults.dropStreams({ graceful: false })
    await waitFor(
      'a reconnection after the cut',
      () => connected() > n2 && sim.stats().streamConnections === 1,
    )
    await replies(5)

    // Silence: the Posts sent meanwhile are lost on that connection; the reconnect after the stall
    // asks for backfill_minutes, which brings them back.
    const n3 = connected()
    sim.faults.silence(2_000)
    for (let i = 0; i < 5; i++) sim.reply(conversationId)
    await waitFor('a stall detected', () =>
      events.some((e) => e.type === 'disconnected' && /silent/.test(e.reason)),
    )
    await waitFor('a reconnection after the stall', () => connected() > n3)
    await waitFor(
      'the Posts of the silence stored',
      async () => (await storedIds(env, conversationId)).length === expected().length,
    )
    // The upstream drops what it makes while silent, even to the new connection: the next replies
    // wait for its keep-alives, which come back with the end of the silence.
    const keepAlives = ingest.stats().keepAlives
    await waitFor('keep-alives after the silence', () => ingest.stats().keepAlives > keepAlives)

    // Malformed, duplicated and reordered lines.
    sim.faults.malformed(2, 'truncated')
    sim.faults.malformed(1, 'not-json')
    sim.faults.duplicateNext(3)
    sim.faults.reorderNext(4)
    await replies(10)

    expect(await storedIds(env, conversationId)).toEqual(expected())
    expect((await conversationRow(env, conversationId))?.post_count).toBe(expected().length)
    await waitFor('the malformed lines kept', async () => {
      const n = await env.db
        .selectFrom('ingest_rejects')
        .select('id')
        .where('source', '=', 'stream')
        .execute()
      return n.length >= 3
    })

    // Removed from every app: removed upstream.
    await deleteRules(env.db, app, { values: [value] })
    await waitFor(
      'the rule removed upstream',
      async () => (await upstreamRuleValues()).length === 0,
      {
        timeoutMs: 5_000,
      },
    )
    await ingest.close()
  })
})
