import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { addRules, createApp, deleteRules, getBackfill, listUpstreamRules } from '@threadline/db'
import {
  createTestEnv,
  generateConversation,
  waitFor,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { BackfillRunner, UpstreamClient } from '@threadline/ingest'
import { FakeUpstream } from './fake-upstream.js'
import { conversationRow, fastOptions, startIngest, startWriter, storedIds } from './harness.js'

/**
 * The ingest end to end against a fake X upstream: rules placed, history backfilled, live replies
 * streamed, all through the real queue and writer into Postgres; then the faults X documents.
 */
let env: TestEnv
let appA: string
let appB: string

beforeAll(async () => {
  env = await createTestEnv()
  await startWriter(env)
  appA = (await createApp(env.db, 'a')).app_id
  appB = (await createApp(env.db, 'b')).app_id
})
afterAll(() => env?.close())

async function fakeUpstream(configure: (f: FakeUpstream) => void = () => {}) {
  const fake = new FakeUpstream()
  fake.keepAliveMs = 100
  configure(fake)
  await fake.start()
  env.defer(() => fake.close())
  return fake
}

/**
 * Each test follows its own conversations: start from no rules at all, and from no stream mark (an
 * earlier test's mark would make the first connection a takeover that recovers a window).
 */
async function clearRules() {
  await env.db.deleteFrom('stream_rules').execute()
  await env.db.deleteFrom('upstream_rules').execute()
  await env.redis.del(`${env.prefix}:ingest:mark`)
}

const upstreamValues = (fake: FakeUpstream) => [...fake.rules.values()].map((r) => r.value).sort()

describe('ingest against a fake upstream', () => {
  it('places a new rule, backfills the history and stores live replies: none missing, none doubled', async () => {
    await clearRules()
    const conv = generateConversation({ size: 40, seed: 11, startMs: Date.UTC(2026, 9, 1) })
    const fake = await fakeUpstream((f) => f.addHistory(conv.lines.slice(0, 25)))
    // A long reconcile period: the rule must reach the upstream through LISTEN/NOTIFY. A long
    // retry after a 409: the stream must connect because the rule sync woke it.
    const { ingest, events } = await startIngest(
      env,
      fastOptions(fake.url, { reconcileMs: 600_000, noRulesRetryMs: 600_000 }),
    )
    const noRules = () =>
      events.filter((e) => e.type === 'disconnected' && e.reason.startsWith('409')).length
    await waitFor('a 409 while the upstream has no rule', () => noRules() > 0)
    // A sync that leaves the upstream without rules must not wake the stream into another 409.
    await ingest.syncRules()
    const value = `conversation_id:${conv.rootId}`
    await addRules(env.db, appA, [{ value }], { cap: 1000 })

    await waitFor('the rule placed upstream', () => upstreamValues(fake).includes(value), {
      timeoutMs: 5_000,
    })
    await waitFor(
      'the history backfilled',
      async () => (await storedIds(env, conv.rootId)).length === 25,
    )
    await waitFor('a stream connection', () => fake.openStreams === 1)
    expect(noRules()).toBe(1)

    for (const line of conv.lines.slice(25)) fake.publish(line)
    fake.publish(conv.lines[30]!) // a repeat from the upstream changes nothing
    await waitFor(
      'live replies stored',
      async () => (await storedIds(env, conv.rootId)).length === 40,
    )

    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    const row = await conversationRow(env, conv.rootId)
    expect(row?.post_count).toBe(40)
    expect(row?.root_post_id).toBe(conv.rootId)

    const placed = await listUpstreamRules(env.db)
    expect(placed).toMatchObject([{ value, status: 'active' }])
    expect(placed[0]!.upstream_id).toBe([...fake.rules.values()][0]!.id)
    const backfill = await getBackfill(env.db, conv.rootId)
    expect(backfill).toMatchObject({
      status: 'done',
      pages: 5,
      root_fetched: true,
      next_token: null,
    })
    // The stream asked for every field storage keeps.
    const asked = fake.connections.at(-1)!
    expect(asked['tweet.fields']).toContain('conversation_id')
    expect(asked['tweet.fields']).toContain('referenced_tweets')
    expect(asked.expansions).toContain('author_id')
    expect(asked['user.fields']).toContain('username')
    expect(ingest.stats().leader).toBe(true)
    await ingest.close()
  })

  it('reads a gzip-encoded stream', async () => {
    await clearRules()
    const conv = generateConversation({ size: 12, seed: 21, startMs: Date.UTC(2026, 8, 20) })
    const fake = await fakeUpstream((f) => {
      f.gzip = true
      f.addHistory(conv.lines.slice(0, 1))
    })
    const { ingest } = await startIngest(env, fastOptions(fake.url))
    await addRules(env.db, appA, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    await waitFor('a stream connection', () => fake.openStreams === 1)
    await waitFor(
      'the root backfilled',
      async () => (await storedIds(env, conv.rootId)).length === 1,
    )
    for (const line of conv.lines.slice(1)) fake.publish(line)
    await waitFor(
      'the replies read through gzip and stored',
      async () => (await storedIds(env, conv.rootId)).length === 12,
    )
    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    // The ingest asked for gzip, so the stream it read was gzip-encoded.
    expect(fake.gzipped).toBe(1)
    await ingest.close()
  })

  it('survives a 429 on connect, an in-stream disconnect, a silent stream, a cut socket and malformed lines', async () => {
    await clearRules()
    const conv = generateConversation({ size: 30, seed: 12, startMs: Date.UTC(2026, 9, 2) })
    const reset = String(Math.ceil(Date.now() / 1000) + 1)
    const fake = await fakeUpstream((f) =>
      f.connectFaults.push({
        status: 429,
        body: { title: 'ConnectionException', connection_issue: 'TooManyConnections' },
        headers: { 'x-rate-limit-reset': reset, 'x-rate-limit-remaining': '0' },
      }),
    )
    const { ingest, events } = await startIngest(env, fastOptions(fake.url, { stallMs: 600 }))
    await addRules(env.db, appA, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })
    const connected = () => events.filter((e) => e.type === 'connected').length
    const publish = (from: number, to: number) => {
      for (const line of conv.lines.slice(from, to)) fake.publish(line)
    }
    const stored = (n: number) =>
      waitFor(`${n} Posts stored`, async () => (await storedIds(env, conv.rootId)).length === n)

    // 429: waits until x-rate-limit-reset (not the 100 ms exponential start), then connects.
    await waitFor('a connection after the 429', () => connected() === 1)
    const limited = events.find(
      (e) => e.type === 'disconnected' && e.failure?.kind === 'rate-limit',
    )
    expect(limited).toBeDefined()
    expect(limited!.type === 'disconnected' && limited!.delayMs).toBeGreaterThan(100)
    await waitFor('the stream open', () => fake.openStreams === 1)
    publish(0, 6)
    await stored(6)

    // An operational disconnect: logged, then a reconnect that asks for backfill_minutes.
    fake.disconnect()
    await waitFor(
      'a reconnection after the disconnect',
      () => connected() === 2 && fake.openStreams === 1,
    )
    expect(
      events.some((e) => e.type === 'disconnected' && /operational disconnect/.test(e.reason)),
    ).toBe(true)
    expect(fake.connections.at(-1)!.backfill_minutes).toBe('2')
    expect(fake.connections[0]!.backfill_minutes).toBeUndefined()
    publish(6, 12)
    await stored(12)

    // Silence (no keep-alive) past the stall bound: the ingest reconnects by itself.
    fake.silent = true
    await waitFor('a stall detected', () =>
      events.some((e) => e.type === 'disconnected' && /silent/.test(e.reason)),
    )
    fake.silent = false
    await waitFor(
      'a reconnection after the stall',
      () => connected() >= 3 && fake.openStreams === 1,
    )
    publish(12, 18)
    await stored(18)

    // A socket cut without a word: a network error, reconnected in linear steps.
    const before = connected()
    fake.cut()
    await waitFor(
      'a reconnection after the cut',
      () => connected() > before && fake.openStreams === 1,
    )
    publish(18, 24)
    await stored(24)

    // Malformed lines are handed on and kept as rejects; they block nothing.
    fake.sendRaw('{"data":{"id":"12x')
    fake.sendRaw('not json at all')
    fake.sendRaw(JSON.stringify({ errors: [{ title: 'Not Found Error', detail: 'gone' }] }))
    publish(24, 30)
    await stored(30)
    await waitFor('the malformed lines kept as rejects', async () => {
      const rejects = await env.db
        .selectFrom('ingest_rejects')
        .select(['raw', 'reason', 'source'])
        .where('source', '=', 'stream')
        .execute()
      return rejects.length === 2 || `${rejects.length} rejects`
    })
    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    expect((await conversationRow(env, conv.rootId))?.post_count).toBe(30)
    expect(ingest.stats().errorLines).toBeGreaterThanOrEqual(2)
    await ingest.close()
  })

  it('says which setting to check when the stream refuses its token, and connects once it is accepted', async () => {
    await clearRules()
    const fake = await fakeUpstream((f) =>
      f.connectFaults.push({ status: 401, body: { title: 'Unauthorized', status: 401 } }),
    )
    const { ingest, events } = await startIngest(env, fastOptions(fake.url))
    await addRules(env.db, appA, [{ value: 'conversation_id:4010' }], { cap: 1000 })
    await waitFor('a connection after the 401', () => events.some((e) => e.type === 'connected'))
    const refused = events.find((e) => e.type === 'disconnected' && e.failure?.kind === 'http')
    // fastOptions sends no token.
    expect(refused?.type === 'disconnected' && refused.reason).toMatch(
      /^401: .*Unauthorized.*no bearer token was sent: set UPSTREAM_BEARER_TOKEN/,
    )
    await ingest.close()
  })

  it('repairs drift, records rejected values once, keeps one upstream rule per value across restarts and replicas, and removes rules no app holds', async () => {
    await clearRules()
    const keep = 'conversation_id:1900000000000000001'
    const fake = await fakeUpstream((f) => {
      // Left over upstream: a value no app holds, and one value twice.
      f.rules.set('1', { id: '1', value: 'conversation_id:42' })
      f.rules.set('2', { id: '2', value: keep })
      f.rules.set('3', { id: '3', value: keep })
    })
    await addRules(env.db, appA, [{ value: keep }, { value: 'bad:thing' }], { cap: 1000 })
    await addRules(env.db, appB, [{ value: keep }], { cap: 1000 })
    const first = await startIngest(env, fastOptions(fake.url, { reconcileMs: 200 }), 'first')

    await waitFor(
      'the upstream set equal to the union',
      () => JSON.stringify(upstreamValues(fake)) === JSON.stringify([keep]),
    )
    const recorded = await waitForValue('the rejection recorded', async () => {
      const rows = await listUpstreamRules(env.db)
      return rows.find((r) => r.value === 'bad:thing' && r.status === 'rejected') ? rows : undefined
    })
    expect(recorded.find((r) => r.value === 'bad:thing')!.reason).toMatch(/invalid operator/)
    const syncs = first.ingest.stats().ruleSyncs
    await waitFor('three more syncs', () => first.ingest.stats().ruleSyncs >= syncs + 3)
    const offered = fake.requests.filter((r) =>
      JSON.stringify(r.body ?? '').includes('bad:thing'),
    ).length
    expect(offered).toBe(1)

    // Deleted upstream by hand: the periodic reconcile puts it back.
    fake.rules.clear()
    await waitFor('the rule restored upstream', () => upstreamValues(fake).includes(keep))

    // A second replica waits on the lease instead of connecting too.
    const second = await startIngest(env, fastOptions(fake.url, { reconcileMs: 200 }), 'second')
    await waitFor('a stream open', () => fake.openStreams === 1)
    const connectionsBefore = fake.connections.length
    await waitFor('the second replica waiting', () => second.ingest.stats().leader === false)
    expect(first.ingest.stats().leader).toBe(true)

    // The leader goes away: the other replica takes over, and still one rule per value.
    await first.ingest.close()
    await waitFor('the second replica leading', () => second.ingest.stats().leader)
    await waitFor(
      'its stream open',
      () => fake.connections.length > connectionsBefore && fake.openStreams === 1,
    )
    const restartSyncs = second.ingest.stats().ruleSyncs
    await waitFor(
      'syncs after the restart',
      () => second.ingest.stats().ruleSyncs >= restartSyncs + 2,
    )
    expect([...fake.rules.values()].filter((r) => r.value === keep)).toHaveLength(1)

    // Removed from one app: another still holds it. Removed from every app: removed upstream.
    await deleteRules(env.db, appA, { values: [keep, 'bad:thing'] })
    await second.ingest.syncRules()
    expect(upstreamValues(fake)).toEqual([keep])
    await deleteRules(env.db, appB, { values: [keep] })
    await waitFor('the rule removed upstream', () => fake.rules.size === 0, { timeoutMs: 5_000 })
    await waitFor(
      'nothing recorded as placed',
      async () => (await listUpstreamRules(env.db)).length === 0,
    )
    await second.ingest.close()
  })

  it('resumes an interrupted backfill from its stored next_token', async () => {
    await clearRules()
    const conv = generateConversation({ size: 30, seed: 13, startMs: Date.UTC(2026, 9, 3) })
    let release: () => void = () => {}
    const gate = new Promise<void>((r) => (release = r))
    const fake = await fakeUpstream((f) => {
      f.addHistory(conv.lines)
      f.searchGate = (req) => (req.query.next_token === 'tok15' ? gate : Promise.resolve())
    })
    // The conversation's backfill pages (a leadership's first connection also searches its window).
    const searches = () =>
      fake.requests.filter((r) => r.path === '/2/tweets/search/recent' && !r.query.since_id)
    const first = await startIngest(env, fastOptions(fake.url), 'first')
    await addRules(env.db, appA, [{ value: `conversation_id:${conv.rootId}` }], { cap: 1000 })

    await waitFor('the backfill held at its fourth page', () =>
      searches().some((r) => r.query.next_token === 'tok15'),
    )
    expect(await getBackfill(env.db, conv.rootId)).toMatchObject({
      status: 'running',
      pages: 3,
      next_token: 'tok15',
    })
    await first.ingest.close()
    const before = searches().length
    release()

    const second = await startIngest(env, fastOptions(fake.url), 'second')
    await waitFor(
      'the backfill done',
      async () => (await getBackfill(env.db, conv.rootId))?.status === 'done',
    )
    const after = searches().slice(before)
    expect(after[0]!.query.next_token).toBe('tok15')
    // Started once from the top, never again.
    expect(searches().filter((r) => r.query.next_token === undefined)).toHaveLength(1)
    await waitFor(
      'the whole history stored',
      async () => (await storedIds(env, conv.rootId)).length === 30,
    )
    expect(await storedIds(env, conv.rootId)).toEqual([...conv.ids].sort())
    expect((await conversationRow(env, conv.rootId))?.post_count).toBe(30)
    await second.ingest.close()
  })

  it('hands a page on under the same page id when it is retried, so its add reuses one job', async () => {
    const conv = generateConversation({ size: 12, seed: 17, startMs: Date.UTC(2026, 9, 4) })
    const fake = await fakeUpstream((f) => f.addHistory(conv.lines))
    const handed: string[] = []
    let failOnce = true
    const runner = new BackfillRunner({
      db: env.db,
      upstream: new UpstreamClient({ baseUrl: fake.url }),
      logger: env.logger,
      options: { search: 'recent', concurrency: 1, rateLimitBackoffMs: 10, maxWaitMs: 100 },
      sink: (_line, _source, pageId) => {
        handed.push(pageId)
        // The add of the second page fails (say Redis went away after the payload was written).
        if (handed.length === 3 && failOnce) {
          failOnce = false
          return Promise.reject(new Error('add failed'))
        }
        return Promise.resolve()
      },
    })
    const signal = new AbortController().signal
    await expect(runner.run(conv.rootId, signal)).rejects.toThrow('add failed')
    expect(await runner.run(conv.rootId, signal)).toBe('done')
    // root, page 0, page 1 (failed), then page 1 again under the same id, and page 2 (12 Posts
    // in pages of 5): each page its own id.
    expect(handed).toHaveLength(5)
    expect(handed[3]).toBe(handed[2])
    expect(new Set(handed).size).toBe(4)
    for (const id of handed) expect(id).toMatch(new RegExp(`^bf-${conv.rootId}-\\d+-(root|\\d+)$`))
  })
})
