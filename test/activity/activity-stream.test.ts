import { openRawStream, type RawStream } from '../stream/harness.js'
import { startTestDelivery } from '../support/delivery.js'
import { startTestWriter } from '../support/writer.js'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createApp } from '@threadline/db'
import { formatPostTime, generateId, snowflakeTime } from '@threadline/domain'
import { activityStreamKey, publishActivity } from '@threadline/queue'
import { createTestEnv, waitFor, waitForValue, type TestEnv } from '@threadline/testing'
import { storeLines, type Writer } from '@threadline/writer'
import { startTestServer } from '@threadline/testing/api'

/**
 * `GET /2/activity/stream` end to end (docs/api.md §4.2): Posts stored by the real writer and relayed,
 * events derived by the real delivery service and published to `<prefix>:activity`, fanned out by
 * the API to raw HTTP readers that check X's framing (`\r\n` after every line, bare `\r\n`
 * keep-alives) as they go.
 */
let env: TestEnv
let api: string
let writer: Writer
const KEEP_ALIVE_MS = 150

interface App {
  appId: string
  token: string
}

async function newApp(name: string): Promise<App> {
  const app = await createApp(env.db, name)
  return { appId: app.app_id, token: app.bearer_token }
}

async function subscribe(app: App, body: Record<string, unknown>): Promise<string> {
  const res = await fetch(`${api}/2/activity/subscriptions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${app.token}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  })
  const json = (await res.json()) as { data: { subscription: { subscription_id: string } } }
  expect(res.status, JSON.stringify(json)).toBe(201)
  return json.data.subscription.subscription_id
}

interface User {
  id: string
  name?: string
  username?: string
}

/** A filtered-stream line: a Post by `author`, optionally a reply to `replyTo`'s author. */
function post(p: { author: User; text?: string; replyTo?: { id: string; author: string } }): {
  id: string
  line: string
} {
  const id = generateId()
  const author = {
    id: p.author.id,
    name: p.author.name ?? `User ${p.author.id}`,
    username: p.author.username ?? `user${p.author.id}`,
  }
  const data: Record<string, unknown> = {
    id,
    text: p.text ?? `post ${id}`,
    author_id: author.id,
    created_at: formatPostTime(snowflakeTime(id)!),
    conversation_id: p.replyTo?.id ?? id,
  }
  if (p.replyTo) {
    data.in_reply_to_user_id = p.replyTo.author
    data.referenced_tweets = [{ type: 'replied_to', id: p.replyTo.id }]
  }
  return { id, line: JSON.stringify({ data, includes: { users: [author] } }) }
}

/** Stores lines as a `posts` job would, then relays the outbox (→ `stored` and `activity` jobs). */
async function store(lines: string[], observedAt = new Date()): Promise<void> {
  await storeLines(env.db, lines, observedAt.toISOString(), 'test')
  await writer.relay()
}

/** How many events delivery has published on the activity stream for one app. */
async function publishedFor(appId: string): Promise<number> {
  const entries = (await env.redis.xrange(activityStreamKey(env.prefix), '-', '+')) as Array<
    [string, string[]]
  >
  return entries.filter(([, fields]) => fields[fields.indexOf('app') + 1] === appId).length
}

/** A plain HTTP reader of the activity stream that checks the framing as it reads. */
const openActivityStream = (token: string, query = '', base = api): Promise<RawStream> =>
  openRawStream(base, token, query, env, '/2/activity/stream')

/** The Post ids (or profile payloads) of a stream's events, in order. */
const events = (s: RawStream) =>
  s.messages.map((m) => {
    const d = m.data as { event_type: string; payload: { id?: string; after?: string } }
    return `${d.event_type} ${d.payload.id ?? d.payload.after}`
  })

beforeAll(async () => {
  env = await createTestEnv()
  const started = await startTestServer(
    env,
    { activity: { keepAliveMs: KEEP_ALIVE_MS, streamMaxConnections: 1 } },
    { listen: true },
  )
  api = started.url
  writer = await startTestWriter(env, {
    options: { concurrency: 1, maxStalledCount: 5, relayIntervalMs: 200 },
  })
  await startTestDelivery(env, {
    // One activity job at a time: events reach the stream in the order their Posts were stored,
    // so a sentinel stored last proves nothing else is on its way.
    concurrency: 1,
    sweepMs: 200,
  })
})
afterAll(() => env?.close())

describe('GET /2/activity/stream', () => {
  it("delivers exactly the events of the app's subscriptions, framed as X's streams", async () => {
    const a = await newApp('stream a')
    const b = await newApp('stream b')
    const subCreate = await subscribe(a, {
      event_type: 'post.create',
      filter: { user_id: '8001' },
      tag: 'by 8001',
    })
    const subReply = await subscribe(a, {
      event_type: 'post.reply.create',
      filter: { user_id: '8002' },
    })
    const subKeyword = await subscribe(a, {
      event_type: 'post.create',
      filter: { keyword: 'Blue Whale' },
      tag: 'whales',
    })
    const subName = await subscribe(a, {
      event_type: 'profile.update.screenname',
      filter: { user_id: '8003' },
    })
    // B subscribes to the same author as A (its own event, with its own tag) and to a user A
    // does not follow: neither may reach A, and A's may not reach B.
    const subB = await subscribe(b, {
      event_type: 'post.create',
      filter: { user_id: '8001' },
      tag: 'b sees 8001',
    })
    await subscribe(b, { event_type: 'post.create', filter: { user_id: '8009' } })

    // 8003's first Post is stored before anyone listens: it is new, not a change.
    const t0 = Date.now()
    const first = post({ author: { id: '8003', name: 'Old Name' } })
    await store([first.line], new Date(t0))

    const sa = await openActivityStream(a.token)
    const sb = await openActivityStream(b.token)
    expect(sa.status).toBe(200)
    expect(sa.headers['content-type']).toBe('application/json; charset=utf-8')

    const root = post({ author: { id: '8002' } })
    const byA = post({ author: { id: '8001' }, text: 'hello from 8001' })
    const reply = post({ author: { id: '8004' }, replyTo: { id: root.id, author: '8002' } })
    const whale = post({ author: { id: '8005' }, text: 'I saw a blue WHALE today!' })
    const notWhale = post({ author: { id: '8005' }, text: 'blue sky, grey whale' })
    const forB = post({ author: { id: '8009' } })
    const renamed = post({ author: { id: '8003', name: 'New Name' } })
    await store([root.line, byA.line, reply.line])
    await store([whale.line, notWhale.line, forB.line])
    await store([renamed.line], new Date(t0 + 1_000))
    // Stored again (a later copy): fires nothing the second time.
    await store([byA.line, reply.line], new Date(t0 + 2_000))
    const sentinel = post({ author: { id: '8001' }, text: 'sentinel' })
    await store([sentinel.line])

    await waitFor('A gets the sentinel', () => events(sa).includes(`post.create ${sentinel.id}`))
    await waitFor('B gets the sentinel', () => events(sb).includes(`post.create ${sentinel.id}`))
    expect(events(sa)).toEqual([
      `post.create ${byA.id}`,
      `post.reply.create ${reply.id}`,
      `post.create ${whale.id}`,
      `profile.update.screenname New Name`,
      `post.create ${sentinel.id}`,
    ])
    expect(events(sb)).toEqual([
      `post.create ${byA.id}`,
      `post.create ${forB.id}`,
      `post.create ${sentinel.id}`,
    ])
    expect(sa.badFraming).toEqual([])
    expect(sb.badFraming).toEqual([])

    // The envelope: exactly {"data":{event_uuid, event_type, filter, tag?, payload}}, in that order.
    for (const line of [...sa.lines, ...sb.lines]) {
      const m = JSON.parse(line) as { data: Record<string, unknown> }
      expect(Object.keys(m)).toEqual(['data'])
      const keys = Object.keys(m.data)
      expect(keys[0]).toBe('event_uuid')
      expect(keys.filter((k) => k !== 'tag')).toEqual([
        'event_uuid',
        'event_type',
        'filter',
        'payload',
      ])
      expect(m.data.event_uuid).toMatch(/^\d{1,19}$/)
    }
    const [mCreate, mReply, mWhale, mName] = sa.messages.map((m) => m.data)
    expect(mCreate).toEqual({
      event_uuid: expect.any(String),
      event_type: 'post.create',
      filter: { user_id: '8001' },
      tag: 'by 8001',
      payload: expect.objectContaining({
        id: byA.id,
        text: 'hello from 8001',
        author_id: '8001',
      }),
    })
    expect(mReply).toEqual({
      event_uuid: expect.any(String),
      event_type: 'post.reply.create',
      filter: { user_id: '8002' },
      payload: expect.objectContaining({ id: reply.id, in_reply_to_user_id: '8002' }),
    })
    expect(mWhale).toMatchObject({ filter: { keyword: 'Blue Whale' }, tag: 'whales' })
    expect(mName).toEqual({
      event_uuid: expect.any(String),
      event_type: 'profile.update.screenname',
      filter: { user_id: '8003' },
      payload: { before: 'Old Name', after: 'New Name' },
    })
    // One event per subscription: B's copy of the same Post is its own event with its own tag.
    const bCreate = sb.messages[0]!.data as Record<string, unknown>
    expect(bCreate).toMatchObject({ filter: { user_id: '8001' }, tag: 'b sees 8001' })
    expect(bCreate.event_uuid).not.toBe(mCreate!.event_uuid)
    expect(new Set(sa.messages.map((m) => m.data.event_uuid)).size).toBe(sa.messages.length)
    expect([subCreate, subReply, subKeyword, subName, subB].every((id) => /^\d+$/.test(id))).toBe(
      true,
    )
    sa.close()
    sb.close()
  })

  it('replays backfill_minutes first, then goes live, and replays nothing without it', async () => {
    const c = await newApp('backfill c')
    const other = await newApp('backfill other')
    await subscribe(c, { event_type: 'post.create', filter: { user_id: '8101' } })
    await subscribe(other, { event_type: 'post.create', filter: { user_id: '8102' } })
    const old = [1, 2, 3].map((i) => post({ author: { id: '8101' }, text: `old ${i}` }))
    await store([old[0]!.line, post({ author: { id: '8102' } }).line])
    await store([old[1]!.line, old[2]!.line])
    // The backfill comes from what delivery published: wait until it is there.
    await waitFor(
      "C's three past events published",
      async () => (await publishedFor(c.appId)) === 3 || undefined,
    )

    const bad = await openActivityStream(c.token, 'backfill_minutes=6')
    await waitFor('the 400 body', () => bad.ended)
    expect(bad.status).toBe(400)
    expect(JSON.parse(bad.body).errors[0].message).toBe(
      'The `backfill_minutes` query parameter value [6] is not between 0 and 5',
    )

    const s = await openActivityStream(c.token, 'backfill_minutes=2')
    const live = post({ author: { id: '8101' }, text: 'live' })
    await store([live.line])
    await waitFor('backfill and live', () => s.messages.length >= 4)
    expect(events(s)).toEqual([...old, live].map((p) => `post.create ${p.id}`))
    expect(s.badFraming).toEqual([])
    s.close()

    const plain = await waitForValue('a reconnect accepted', async () => {
      const again = await openActivityStream(c.token)
      if (again.status === 200) return again
      again.close()
      return undefined
    })
    const next = post({ author: { id: '8101' }, text: 'next' })
    await store([next.line])
    await waitFor('the next live event', () => plain.messages.length >= 1)
    const sentinel = post({ author: { id: '8101' }, text: 'sentinel' })
    await store([sentinel.line])
    await waitFor('the sentinel', () => plain.messages.length >= 2)
    expect(events(plain)).toEqual([`post.create ${next.id}`, `post.create ${sentinel.id}`])
    plain.close()
  })

  it("backfills an app's recent events even when other apps published many more before them", async () => {
    const d = await newApp('backfill busy')
    await subscribe(d, { event_type: 'post.create', filter: { user_id: '8201' } })
    // Another app's burst first: 12k entries in the window, more than one read returns, then D's.
    const flood = Array.from({ length: 12_000 }, (_, i) => ({
      app_id: '1',
      body: JSON.stringify({ data: { event_uuid: String(i + 1) } }),
    }))
    await publishActivity(env.redis, env.prefix, flood, 600_000)
    const mine = post({ author: { id: '8201' }, text: 'after the flood' })
    await store([mine.line])
    await waitFor("D's event published", async () => {
      const key = `${env.prefix}:activity`
      const [last] = (await env.redis.xrevrange(key, '+', '-', 'COUNT', 1)) as Array<
        [string, string[]]
      >
      return last?.[1].includes(d.appId) || undefined
    })
    const s = await openActivityStream(d.token, 'backfill_minutes=5')
    const live = post({ author: { id: '8201' }, text: 'live' })
    await store([live.line])
    await waitFor('the live event', () => events(s).includes(`post.create ${live.id}`))
    expect(events(s)).toEqual([`post.create ${mine.id}`, `post.create ${live.id}`])
    s.close()
  })

  it('sends an event once when it is both in the backfill window and still on its way live', async () => {
    const e = await newApp('backfill overlap')
    await subscribe(e, { event_type: 'post.create', filter: { user_id: '8251' } })
    // A burst the API's live reader needs many reads to get through, with E's event at its end,
    // and the stream opened at once: the event is in the window and still ahead of the reader.
    const flood = Array.from({ length: 30_000 }, (_, i) => ({
      app_id: '1',
      body: JSON.stringify({ data: { event_uuid: String(i + 1) } }),
    }))
    const mine = JSON.stringify({
      data: { event_uuid: '42', event_type: 'post.create', payload: { id: 'overlap' } },
    })
    await publishActivity(
      env.redis,
      env.prefix,
      [...flood, { app_id: e.appId, body: mine }],
      600_000,
    )
    const s = await openActivityStream(e.token, 'backfill_minutes=1')
    const live = post({ author: { id: '8251' }, text: 'live' })
    await store([live.line])
    await waitFor('the live event', () => events(s).includes(`post.create ${live.id}`))
    expect(events(s)).toEqual(['post.create overlap', `post.create ${live.id}`])
    s.close()
  })

  it('answers 429 past the connection limit, and accepts again once the stream closes', async () => {
    const e = await newApp('limit')
    const first = await openActivityStream(e.token)
    expect(first.status).toBe(200)
    const second = await openActivityStream(e.token)
    await waitFor('the 429 body', () => second.ended)
    expect(second.status).toBe(429)
    expect(second.headers['content-type']).toBe('application/json; charset=utf-8')
    expect(JSON.parse(second.body)).toEqual({
      title: 'ConnectionException',
      detail: expect.any(String),
      connection_issue: 'TooManyConnections',
      type: 'https://api.twitter.com/2/problems/streaming-connection',
    })
    // Another app is not counted against this one.
    const f = await newApp('limit other')
    const elsewhere = await openActivityStream(f.token)
    expect(elsewhere.status).toBe(200)
    first.close()
    const again = await waitForValue('a reconnect accepted', async () => {
      const s = await openActivityStream(e.token)
      if (s.status === 200) return s
      s.close()
      return undefined
    })
    again.close()
    elsewhere.close()
  })

  it('sends a bare \\r\\n keep-alive at the configured interval when quiet', async () => {
    const q = await newApp('quiet')
    await subscribe(q, { event_type: 'post.create', filter: { user_id: '8301' } })
    const s = await openActivityStream(q.token)
    await waitFor('three keep-alives', () => s.keepAlives >= 3)
    expect(s.messages).toEqual([])
    expect(s.badFraming).toEqual([])
    // An event in between does not break the framing.
    const p = post({ author: { id: '8301' } })
    await store([p.line])
    await waitFor('the event', () => s.messages.length === 1)
    const seen = s.keepAlives
    await waitFor('keep-alives after the event', () => s.keepAlives >= seen + 2)
    expect(events(s)).toEqual([`post.create ${p.id}`])
    expect(s.badFraming).toEqual([])
    s.close()
  })

  it('sends OperationalDisconnect to every open stream on shutdown, then ends them', async () => {
    const local = await startTestServer(
      env,
      { activity: { keepAliveMs: 10_000 } },
      { listen: true },
    )
    const g = await newApp('shutdown g')
    const h = await newApp('shutdown h')
    const sg = await openActivityStream(g.token, '', local.url)
    const sh = await openActivityStream(h.token, '', local.url)
    expect([sg.status, sh.status]).toEqual([200, 200])
    await local.server.close()
    for (const s of [sg, sh]) {
      await waitFor('the stream ended', () => s.ended)
      expect(s.badFraming).toEqual([])
      expect(s.messages).toEqual([
        {
          errors: [
            {
              title: 'operational-disconnect',
              disconnect_type: 'OperationalDisconnect',
              detail: expect.any(String),
              type: 'https://api.twitter.com/2/problems/operational-disconnect',
            },
          ],
        },
      ])
    }
  })
})
