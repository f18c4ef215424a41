import http from 'node:http'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { applyComplianceEvents, sql } from '@threadline/db'
import type { ComplianceEvent } from '@threadline/domain'
import { createTestEnv, generateConversation, waitFor, type TestEnv } from '@threadline/testing'
import { assertXSchema, startTestServer, storeLines } from '@threadline/testing/api'
import { compliancePartition } from '../compliance/partition.js'

let env: TestEnv
let base: string
let token: string
const conv = generateConversation({ size: 40, seed: 46, users: 6 })
/** Posts withdrawn while streams open: none lost or sent twice between replay and live. */
const burst = generateConversation({ size: 300, seed: 49, users: 6, startMs: Date.UTC(2026, 9, 1) })
const t0 = Date.now() - 30 * 60_000
const at = (minutes: number) => new Date(t0 + minutes * 60_000).toISOString()

const event = (e: Pick<ComplianceEvent, 'id' | 'action'> & Partial<ComplianceEvent>) =>
  ({
    kind: 'tweet',
    eventAt: at(0),
    receivedAt: at(0),
    source: 'stream',
    ...e,
  }) as ComplianceEvent

/** The first 20 Posts deleted 0–19 minutes after t0. */
const past = conv.ids.slice(0, 20).map((id, i) => event({ id, action: 'delete', eventAt: at(i) }))

beforeAll(async () => {
  env = await createTestEnv()
  ;({ token, url: base } = await startTestServer(
    env,
    { compliance: { logPollMs: 100, keepAliveMs: 60_000 } },
    { listen: true },
  ))
  await storeLines(env.db, conv.lines)
  await storeLines(env.db, burst.lines)
  await applyComplianceEvents(env.db, past)
})
afterAll(() => env?.close())

interface Stream {
  lines: Array<Record<string, unknown>>
  status: number
  ended: boolean
  close(): void
}

/** Opens a compliance stream and collects its lines until closed. */
function open(path: string): Promise<Stream> {
  return new Promise((resolve, reject) => {
    const req = http.get(`${base}${path}`, { headers: { authorization: `Bearer ${token}` } })
    req.on('error', reject)
    req.on('response', (res) => {
      const stream: Stream = {
        lines: [],
        status: res.statusCode ?? 0,
        ended: false,
        close: () => req.destroy(),
      }
      let buf = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => {
        buf += d
        let nl: number
        while ((nl = buf.indexOf('\r\n')) >= 0) {
          const line = buf.slice(0, nl)
          buf = buf.slice(nl + 2)
          if (line !== '') stream.lines.push(JSON.parse(line) as Record<string, unknown>)
        }
      })
      res.on('end', () => (stream.ended = true))
      res.on('error', () => (stream.ended = true))
      resolve(stream)
    })
  })
}

const deletedIds = (s: Stream) =>
  s.lines.map((l) => (l as { data: { delete: { tweet: { id: string } } } }).data.delete.tweet.id)

describe('the compliance streams', () => {
  it('replay the log from start_time on each partition, then end at end_time', async () => {
    const seen: string[][] = []
    for (const partition of [1, 2, 3, 4]) {
      const s = await open(
        `/2/tweets/compliance/stream?partition=${partition}&start_time=${at(5)}&end_time=${at(15)}`,
      )
      expect(s.status).toBe(200)
      await waitFor('the replay to end', () => s.ended || `${s.lines.length} lines so far`)
      for (const line of s.lines) assertXSchema('TweetComplianceStreamResponse', line)
      const ids = deletedIds(s)
      for (const id of ids) expect(compliancePartition(id)).toBe(partition)
      seen.push(ids)
    }
    // Every event from 5 to 15 minutes (end excluded) once, on exactly one partition.
    const all = seen.flat()
    expect(new Set(all).size).toBe(all.length)
    expect(all.sort()).toEqual(conv.ids.slice(5, 15).sort())
    // The hash spreads them: more than one partition has some.
    expect(seen.filter((ids) => ids.length > 0).length).toBeGreaterThan(1)
  })

  it('send what is applied after they open, each event on its partition', async () => {
    const streams = await Promise.all(
      [1, 2, 3, 4].map((p) => open(`/2/tweets/compliance/stream?partition=${p}`)),
    )
    const live = conv.ids.slice(20, 30)
    const now = new Date().toISOString()
    await applyComplianceEvents(
      env.db,
      live.map((id) => event({ id, action: 'delete', eventAt: now, receivedAt: now })),
    )
    await waitFor('the live events on their partitions', () => {
      const n = streams.reduce((sum, s) => sum + s.lines.length, 0)
      return n >= live.length || `${n} of ${live.length}`
    })
    for (const [i, s] of streams.entries()) {
      for (const id of deletedIds(s)) expect(compliancePartition(id)).toBe(i + 1)
    }
    expect(streams.flatMap(deletedIds).sort()).toEqual([...live].sort())
    for (const s of streams) s.close()
  })

  it('hand over from the replay to live events without losing or repeating one', async () => {
    const from = new Date().toISOString()
    const streams: Stream[] = []
    // Events go on being applied, ten at a time, while the four streams open one by one.
    for (let i = 0; i < burst.ids.length; i += 10) {
      const eventAt = new Date().toISOString()
      await applyComplianceEvents(
        env.db,
        burst.ids
          .slice(i, i + 10)
          .map((id) => event({ id, action: 'delete', eventAt, receivedAt: eventAt })),
      )
      if (i % 70 === 0 && streams.length < 4) {
        const p = streams.length + 1
        streams.push(await open(`/2/tweets/compliance/stream?partition=${p}&start_time=${from}`))
      }
    }
    await waitFor('every burst event on its partition', () => {
      const n = streams.reduce((sum, s) => sum + s.lines.length, 0)
      return n >= burst.ids.length || `${n} of ${burst.ids.length}`
    })
    const got = streams.flatMap(deletedIds)
    expect(got.length).toBe(burst.ids.length)
    expect(new Set(got).size).toBe(burst.ids.length)
    for (const s of streams) {
      // In the order they were applied (the burst's ids ascend).
      const ids = deletedIds(s)
      expect(ids).toEqual([...ids].sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1)))
      s.close()
    }
  })

  it('deliver an event whose transaction commits after a later one', async () => {
    const streams = await Promise.all(
      [1, 2, 3, 4].map((p) => open(`/2/tweets/compliance/stream?partition=${p}`)),
    )
    const [slow, fast] = [conv.ids[38]!, conv.ids[39]!]
    const now = new Date().toISOString()
    let commit!: () => void
    const gate = new Promise<void>((resolve) => (commit = resolve))
    let inserted!: () => void
    const holding = new Promise<void>((resolve) => (inserted = resolve))
    // A writer's transaction takes its seq, then is slow to commit.
    const slowTx = env.db.transaction().execute(async (trx) => {
      await sql`INSERT INTO compliance_log (kind, target_id, action, event_at, received_at, source)
        VALUES ('tweet', ${slow}, 'delete', ${now}, ${now}, 'stream')`.execute(trx)
      inserted()
      await gate
    })
    await holding
    await applyComplianceEvents(env.db, [event({ id: fast, action: 'delete', eventAt: now })])
    const all = () => streams.flatMap(deletedIds)
    await waitFor('the later event', () => all().includes(fast) || 'not yet')
    commit()
    await slowTx
    await waitFor('the earlier event, committed late', () => all().includes(slow) || 'not yet')
    expect(all().filter((id) => id === slow || id === fast)).toHaveLength(2)
    for (const s of streams) s.close()
  })

  it('the users stream carries user events in X’s shapes', async () => {
    const user = '1003'
    const partition = compliancePartition(user)
    const s = await open(`/2/users/compliance/stream?partition=${partition}&backfill_minutes=5`)
    const now = new Date().toISOString()
    await applyComplianceEvents(env.db, [
      event({ kind: 'user', id: user, action: 'user_suspend', eventAt: now, receivedAt: now }),
    ])
    await waitFor('the user event', () => s.lines.length > 0 || 'nothing yet')
    assertXSchema('UserComplianceStreamResponse', s.lines[0])
    expect(s.lines[0]).toMatchObject({ data: { user_suspend: { user: { id: user } } } })
    s.close()
  })

  it('replay with backfill_minutes what was applied in those minutes, whatever its event time', async () => {
    // A sweep's events carry X's event_at, hours old, and are applied now; an event applied ten
    // minutes ago is outside a 5-minute backfill.
    // Two Posts on one partition (10 ids, 4 partitions: two share one), the older applied first.
    const spare = conv.ids.slice(30, 40)
    const old = spare.find((a) =>
      spare.some((b) => b !== a && compliancePartition(b) === compliancePartition(a)),
    )!
    const recent = spare.find(
      (b) => b !== old && compliancePartition(b) === compliancePartition(old),
    )!
    const dayAgo = new Date(Date.now() - 86_400_000).toISOString()
    await applyComplianceEvents(env.db, [
      event({ id: old, action: 'delete', eventAt: dayAgo, source: 'job' }),
    ])
    await sql`UPDATE compliance_log SET applied_at = now() - interval '10 minutes'
      WHERE target_id = ${old}`.execute(env.db)
    await applyComplianceEvents(env.db, [
      event({ id: recent, action: 'delete', eventAt: dayAgo, source: 'job' }),
    ])
    const partition = compliancePartition(recent)
    const s = await open(`/2/tweets/compliance/stream?partition=${partition}&backfill_minutes=5`)
    // In seq order: had the older one been replayed, it would have come first.
    await waitFor('the backfill', () => deletedIds(s).includes(recent) || 'not yet')
    const got = deletedIds(s)
    s.close()
    expect(got).toContain(recent)
    expect(got).not.toContain(old)
  })

  it('end with X’s operational-disconnect line when the server shuts down', async () => {
    const other = await startTestServer(env, {}, { listen: true })
    const res = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http
        .get(`${other.url}/2/users/compliance/stream?partition=2`, {
          headers: { authorization: `Bearer ${other.token}` },
        })
        .on('response', resolve)
        .on('error', reject)
    })
    expect(res.statusCode).toBe(200)
    let text = ''
    res.setEncoding('utf8').on('data', (d: string) => (text += d))
    const ended = new Promise<void>((resolve) => res.on('end', () => resolve()))
    await other.server.close()
    await ended
    expect(JSON.parse(text.trim())).toMatchObject({
      errors: [{ title: 'operational-disconnect', disconnect_type: 'OperationalDisconnect' }],
    })
  })

  it('answer X’s 400s for bad parameters', async () => {
    for (const [query, message] of [
      ['', 'The `partition` query parameter can not be empty'],
      ['partition=5', 'The `partition` query parameter value [5] is not between 1 and 4'],
      [
        'partition=1&backfill_minutes=6',
        'The `backfill_minutes` query parameter value [6] is not between 0 and 5',
      ],
      [
        `partition=1&start_time=${at(10)}&end_time=${at(5)}`,
        `The \`start_time\` query parameter value [${at(10)}] must be before the \`end_time\` query parameter value [${at(5)}]`,
      ],
    ] as const) {
      const res = await fetch(`${base}/2/tweets/compliance/stream?${query}`, {
        headers: { authorization: `Bearer ${token}` },
      })
      expect(res.status).toBe(400)
      const body = (await res.json()) as { errors: Array<{ message: string }> }
      assertXSchema('Problem', body)
      expect(body.errors.map((e) => e.message)).toEqual([message])
    }
  })
})
