import { startTestDelivery } from '../support/delivery.js'
import { startTestWriter } from '../support/writer.js'
import { createHmac } from 'node:crypto'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Client as XdkClient } from '@xdevplatform/xdk'
import { createApp } from '@threadline/db'
import { formatPostTime, generateId } from '@threadline/domain'
import { addPostsBatch, createQueue, type PostsJob } from '@threadline/queue'
import { createTestEnv, waitFor, waitForValue, type TestEnv } from '@threadline/testing'
import { replayWebhooks, webhookFailures } from '../../packages/cli/src/commands/webhooks.js'
import { startTestServer } from '@threadline/testing/api'

/**
 * Activity end to end (issue 7): Posts stored through the real writer, events derived by the
 * delivery service, POSTed to a local webhook receiver (WEBHOOK_ALLOW_PRIVATE) and checked there.
 */
interface Receipt {
  path: string
  body: string
  signature: string | undefined
  ok: boolean
}

let env: TestEnv
let api: string
let strictApi: string
let tokenA: string
let tokenB: string
let secretA: string
let posts: ReturnType<typeof createQueue<PostsJob>>
const receipts: Receipt[] = []
/** Per path: how many POSTs to refuse with a 503 before accepting. */
const failNext = new Map<string, number>()
let receiverUrl: string
const secrets = new Map<string, string>()

const hmac = (secret: string, data: string) =>
  `sha256=${createHmac('sha256', secret).update(data).digest('base64')}`

function startReceiver(): Promise<http.Server> {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://x')
    const appKey = url.pathname.split('/')[1]!
    if (url.pathname === '/redirect') {
      res.writeHead(302, { location: 'http://169.254.169.254/' }).end()
      return
    }
    if (req.method === 'GET') {
      const secret = url.pathname.startsWith('/bad') ? 'wrong' : secrets.get(appKey)
      const token = url.searchParams.get('crc_token') ?? ''
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ response_token: hmac(secret ?? 'none', token) }))
      return
    }
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const left = failNext.get(url.pathname) ?? 0
      const ok = left <= 0
      if (!ok) failNext.set(url.pathname, left - 1)
      receipts.push({
        path: url.pathname,
        body: Buffer.concat(chunks).toString('utf8'),
        signature: req.headers['x-twitter-webhooks-signature'] as string | undefined,
        ok,
      })
      res.writeHead(ok ? 200 : 503).end()
    })
  })
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve(server)))
}

async function call(base: string, token: string, method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
    },
    body: body !== undefined ? JSON.stringify(body) : undefined,
  })
  return { status: res.status, body: (await res.json()) as any }
}

interface PostSpec {
  author: { id: string; name?: string; username?: string }
  text?: string
  replyTo?: { id: string; author: string }
  mentions?: Array<{ id: string; username: string }>
}

function line(p: PostSpec, id = generateId()): { id: string; line: string } {
  const author = {
    id: p.author.id,
    name: p.author.name ?? `User ${p.author.id}`,
    username: p.author.username ?? `user${p.author.id}`,
  }
  const post: Record<string, unknown> = {
    id,
    text: p.text ?? `post ${id}`,
    author_id: author.id,
    created_at: formatPostTime(new Date()),
    conversation_id: p.replyTo?.id ?? id,
    edit_history_tweet_ids: [id],
  }
  if (p.replyTo) {
    post.in_reply_to_user_id = p.replyTo.author
    post.referenced_tweets = [{ type: 'replied_to', id: p.replyTo.id }]
  }
  if (p.mentions) {
    post.entities = { mentions: p.mentions.map((m) => ({ start: 0, end: 1, ...m })) }
  }
  return { id, line: JSON.stringify({ data: post, includes: { users: [author] } }) }
}

async function store(lines: string[], observedAt = new Date()) {
  await addPostsBatch(posts, env.redis, env.prefix, {
    source: 'test',
    observed_at: observedAt.toISOString(),
    lines,
  })
}

const received = (path: string) => receipts.filter((r) => r.path === path && r.ok)
const parsed = (r: Receipt) => JSON.parse(r.body) as { data: Record<string, any> }

beforeAll(async () => {
  env = await createTestEnv({ WEBHOOK_ALLOW_PRIVATE: 'true' })
  const receiver = await startReceiver()
  env.defer(() => new Promise((r) => receiver.close(r)))
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

  const started = await startTestServer(env, { activity: { allowPrivate: true } }, { listen: true })
  api = started.url
  tokenA = started.token
  const appA = await env.db
    .selectFrom('apps')
    .select('consumer_secret')
    .where('id', '=', started.appId)
    .executeTakeFirstOrThrow()
  secretA = appA.consumer_secret
  secrets.set('a', secretA)
  const b = await createApp(env.db, 'app b')
  tokenB = b.bearer_token
  secrets.set('b', b.consumer_secret)
  const strict = await startTestServer(env, { activity: { allowPrivate: false } }, { listen: true })
  strictApi = strict.url

  await startTestWriter(env, {
    options: {
      concurrency: 1,
      lockDuration: 5_000,
      stalledInterval: 5_000,
      maxStalledCount: 5,
      relayIntervalMs: 100,
    },
  })
  await startTestDelivery(env, {
    concurrency: 2,
    webhookConcurrency: 8,
    lockDuration: 5_000,
    stalledInterval: 5_000,
    maxAttempts: 4,
  })
  posts = createQueue<PostsJob>('posts', {
    connection: env.redis,
    prefix: env.prefix,
    logger: env.logger,
  })
  env.defer(() => posts.close())
})
afterAll(() => env?.close())

async function webhookFor(token: string, path: string): Promise<string> {
  const res = await call(api, token, 'POST', '/2/webhooks', { url: `${receiverUrl}${path}` })
  expect(res.status).toBe(200)
  expect(res.body.data.valid).toBe(true)
  return res.body.data.id as string
}

async function subscribe(token: string, body: Record<string, unknown>): Promise<string> {
  const res = await call(api, token, 'POST', '/2/activity/subscriptions', body)
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data.subscription.subscription_id as string
}

describe('webhooks', () => {
  it('registers a webhook after its CRC check and refuses a wrong answer or a redirect', async () => {
    const ok = await call(api, tokenA, 'POST', '/2/webhooks', { url: `${receiverUrl}/a/crc` })
    expect(ok.status).toBe(200)
    expect(ok.body.data).toMatchObject({ url: `${receiverUrl}/a/crc`, valid: true })
    expect(ok.body.data.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/)
    const bad = await call(api, tokenA, 'POST', '/2/webhooks', { url: `${receiverUrl}/bad` })
    expect(bad.status).toBe(400)
    expect(bad.body.title).toBe('CrcValidationFailed')
    const redirect = await call(api, tokenA, 'POST', '/2/webhooks', {
      url: `${receiverUrl}/redirect`,
    })
    expect(redirect.status).toBe(400)
    expect(redirect.body.detail).toMatch(/redirect/)
    const put = await call(api, tokenA, 'PUT', `/2/webhooks/${ok.body.data.id}`)
    expect(put).toEqual({ status: 200, body: { data: { valid: true } } })
    const list = await call(api, tokenA, 'GET', '/2/webhooks')
    expect(list.body.meta.result_count).toBeGreaterThanOrEqual(1)
  })

  it('refuses private, loopback, metadata and non-https targets when not allowed', async () => {
    for (const url of [
      'https://127.0.0.1/hook',
      'https://10.1.2.3/hook',
      'https://169.254.169.254/latest/meta-data',
      'https://[::1]/hook',
      'https://[::ffff:127.0.0.1]/hook',
      'https://localhost:9/hook',
      `${receiverUrl}/a/plain-http`,
    ]) {
      const res = await call(strictApi, tokenA, 'POST', '/2/webhooks', { url })
      expect(res.status, url).toBe(400)
      expect(res.body.title, url).toBe('Invalid Request')
    }
  })
})

describe('events', () => {
  it('delivers one signed POST for a stored reply, and nothing again when it is stored twice', async () => {
    const hook = await webhookFor(tokenA, '/a/replies')
    const sub = await subscribe(tokenA, {
      event_type: 'post.reply.create',
      filter: { user_id: '7001' },
      tag: 'replies',
      webhook_id: hook,
    })
    const root = line({ author: { id: '7001' } })
    const reply = line({ author: { id: '7002' }, replyTo: { id: root.id, author: '7001' } })
    await store([root.line, reply.line])
    const [first] = await waitForValue('the reply event', () =>
      received('/a/replies').length === 1 ? received('/a/replies') : undefined,
    )
    expect(first!.signature).toBe(hmac(secretA, first!.body))
    const event = parsed(first!).data
    expect(event).toMatchObject({
      event_type: 'post.reply.create',
      filter: { user_id: '7001' },
      tag: 'replies',
      payload: { id: reply.id, in_reply_to_user_id: '7001' },
    })
    expect(event.event_uuid).toMatch(/^\d{1,19}$/)
    expect(sub).toMatch(/^\d+$/)
    // The same reply again (a later copy), then a second reply: only the second fires.
    await store([reply.line], new Date(Date.now() + 1_000))
    const second = line({ author: { id: '7003' }, replyTo: { id: root.id, author: '7001' } })
    await store([second.line])
    await waitFor('the second reply', () => received('/a/replies').length >= 2)
    await delivery_settled()
    expect(received('/a/replies').map((r) => parsed(r).data.payload.id)).toEqual([
      reply.id,
      second.id,
    ])
  })

  it('retries a receiver that is down for a while and delivers once, with the same event_uuid', async () => {
    const hook = await webhookFor(tokenA, '/a/flaky')
    await subscribe(tokenA, {
      event_type: 'post.create',
      filter: { user_id: '7101' },
      webhook_id: hook,
    })
    failNext.set('/a/flaky', 2)
    const p = line({ author: { id: '7101' } })
    await store([p.line])
    await waitFor('delivery after retries', () => received('/a/flaky').length === 1)
    // Once is once only when nothing is left to deliver: a second copy would come later.
    await delivery_settled()
    const all = receipts.filter((r) => r.path === '/a/flaky')
    expect(all.map((r) => r.ok)).toEqual([false, false, true])
    expect(new Set(all.map((r) => parsed(r).data.event_uuid)).size).toBe(1)
  })

  it('parks events of a receiver down for good; they are listed and replayed', async () => {
    const hook = await webhookFor(tokenA, '/a/down')
    await subscribe(tokenA, {
      event_type: 'post.create',
      filter: { user_id: '7201' },
      webhook_id: hook,
    })
    failNext.set('/a/down', 1_000_000)
    const p = line({ author: { id: '7201' } })
    await store([p.line])
    const failures = await waitForValue('a parked delivery', async () => {
      const f = (await webhookFailures(env.db)).filter((x) => x.webhook_id === hook)
      return f.length === 1 ? f : undefined
    })
    expect(failures[0]!.attempts).toBe(4)
    expect(failures[0]!.reason).toMatch(/503/)
    failNext.set('/a/down', 0)
    const result = await replayWebhooks(env.db, env.redis, env.prefix, env.logger, [
      failures[0]!.id,
    ])
    expect(result.replayed).toEqual([failures[0]!.id])
    const [ok] = await waitForValue('the replayed event', () =>
      received('/a/down').length === 1 ? received('/a/down') : undefined,
    )
    expect(parsed(ok!).data.event_uuid).toBe(failures[0]!.event_uuid)
    expect(parsed(ok!).data.payload.id).toBe(p.id)
    expect((await webhookFailures(env.db)).some((f) => f.id === failures[0]!.id)).toBe(false)
  })

  it('filters post.create by keyword, as a phrase of tokens', async () => {
    const hook = await webhookFor(tokenA, '/a/keyword')
    await subscribe(tokenA, {
      event_type: 'post.create',
      filter: { keyword: 'Blue Whale' },
      webhook_id: hook,
    })
    const yes = line({ author: { id: '7301' }, text: 'I saw a blue WHALE today!' })
    const no = line({ author: { id: '7302' }, text: 'blue sky, grey whale' })
    await store([no.line, yes.line])
    await waitFor('the keyword event', () => received('/a/keyword').length >= 1)
    await delivery_settled()
    expect(received('/a/keyword').map((r) => parsed(r).data.payload.id)).toEqual([yes.id])
    expect(parsed(received('/a/keyword')[0]!).data.filter).toEqual({ keyword: 'Blue Whale' })
  })

  it('fires profile.update.screenname and .handle when a stored Post carries a changed user', async () => {
    const hook = await webhookFor(tokenA, '/a/profile')
    await subscribe(tokenA, {
      event_type: 'profile.update.screenname',
      filter: { user_id: '7401' },
      webhook_id: hook,
    })
    await subscribe(tokenA, {
      event_type: 'profile.update.handle',
      filter: { user_id: '7401' },
      webhook_id: hook,
    })
    const t0 = Date.now()
    await store(
      [line({ author: { id: '7401', name: 'Old Name', username: 'oldhandle' } }).line],
      new Date(t0),
    )
    await waitFor('the first Post stored', async () => {
      const u = await env.db
        .selectFrom('users')
        .select('id')
        .where('id', '=', '7401')
        .executeTakeFirst()
      return u !== undefined
    })
    await store(
      [line({ author: { id: '7401', name: 'New Name', username: 'newhandle' } }).line],
      new Date(t0 + 1_000),
    )
    await waitFor('both profile events', () => received('/a/profile').length === 2)
    const byType = Object.fromEntries(
      received('/a/profile').map((r) => [parsed(r).data.event_type, parsed(r).data.payload]),
    )
    expect(byType).toEqual({
      'profile.update.screenname': { before: 'Old Name', after: 'New Name' },
      'profile.update.handle': { before: 'oldhandle', after: 'newhandle' },
    })
  })
})

describe('isolation between apps', () => {
  it('never lets one app see, change, delete or use what another app owns', async () => {
    const hookA = await webhookFor(tokenA, '/a/private')
    const subA = await subscribe(tokenA, {
      event_type: 'post.mention.create',
      filter: { user_id: '7501' },
      webhook_id: hookA,
    })
    const listB = await call(api, tokenB, 'GET', '/2/activity/subscriptions')
    expect(listB.body).toEqual({ meta: { total_subscriptions: 0, result_count: 0 } })
    const hooksB = await call(api, tokenB, 'GET', '/2/webhooks')
    expect(hooksB.body).toEqual({ meta: { result_count: 0 } })
    const missing = '1234567890123'
    const norm = (b: any, id: string) => JSON.parse(JSON.stringify(b).replaceAll(id, 'ID'))
    for (const [method, path, body] of [
      ['PUT', '/2/activity/subscriptions/', { tag: 'mine now' }],
      ['DELETE', '/2/activity/subscriptions/', undefined],
    ] as const) {
      const foreign = await call(api, tokenB, method, `${path}${subA}`, body)
      const none = await call(api, tokenB, method, `${path}${missing}`, body)
      expect(foreign.status).toBe(404)
      expect(norm(foreign.body, subA)).toEqual(norm(none.body, missing))
    }
    for (const method of ['PUT', 'DELETE'] as const) {
      const foreign = await call(api, tokenB, method, `/2/webhooks/${hookA}`)
      const none = await call(api, tokenB, method, `/2/webhooks/${missing}`)
      expect(foreign.status).toBe(404)
      expect(norm(foreign.body, hookA)).toEqual(norm(none.body, missing))
    }
    const useForeign = await call(api, tokenB, 'POST', '/2/activity/subscriptions', {
      event_type: 'post.create',
      filter: { user_id: '7502' },
      webhook_id: hookA,
    })
    expect(useForeign.status).toBe(404)
    // A's subscription is untouched and still delivers to A only.
    const mention = line({
      author: { id: '7503' },
      text: '@target hi',
      mentions: [{ id: '7501', username: 'target' }],
    })
    await store([mention.line])
    await waitFor('the mention event', () => received('/a/private').length === 1)
    const listA = await call(api, tokenA, 'GET', '/2/activity/subscriptions')
    expect(
      listA.body.data.some((s: any) => s.subscription_id === subA && s.tag === undefined),
    ).toBe(true)
  })

  it('validates bodies and reports identical subscriptions', async () => {
    const bad = await call(api, tokenA, 'POST', '/2/activity/subscriptions', {
      event_type: 'nope',
      filter: {},
    })
    expect(bad.status).toBe(400)
    expect(bad.body.errors[0].message).toMatch(
      /^The `event_type` body parameter value \[nope\] is not one of \[post\.create,/,
    )
    const body = { event_type: 'follow.follow', filter: { user_id: '7601' } }
    await subscribe(tokenA, body)
    const again = await call(api, tokenA, 'POST', '/2/activity/subscriptions', body)
    expect(again.status).toBe(409)
  })
})

describe('@xdevplatform/xdk', () => {
  it('gets, creates, updates and deletes subscriptions', async () => {
    const client = new XdkClient({ bearerToken: tokenB, baseUrl: api })
    const created = (await client.activity.createSubscription({
      eventType: 'post.create',
      filter: { userId: '7701' },
      tag: 'xdk',
    } as any)) as any
    // The SDK hands responses over with camelCase keys.
    const id = created.data.subscription.subscriptionId as string
    expect(created.meta.totalSubscriptions).toBe(1)
    const listed = (await client.activity.getSubscriptions({ maxResults: 10 } as any)) as any
    expect(listed.data.map((s: any) => s.subscriptionId)).toEqual([id])
    const updated = (await client.activity.updateSubscription(id, { tag: 'renamed' } as any)) as any
    expect(updated.data.subscription.tag).toBe('renamed')
    const deleted = (await client.activity.deleteSubscription(id)) as any
    expect(deleted.data.deleted).toBe(true)
    expect(deleted.meta.totalSubscriptions).toBe(0)
  })
})

/** Waits until the activity and webhooks queues hold nothing waiting, delayed or active. */
async function delivery_settled() {
  const names = ['activity', 'webhooks'] as const
  const queues = names.map((n) =>
    createQueue(n, { connection: env.redis, prefix: env.prefix, logger: env.logger }),
  )
  try {
    await waitFor('delivery queues empty', async () => {
      for (const q of queues) {
        const c = await q.getJobCounts('waiting', 'active', 'delayed', 'prioritized')
        if (Object.values(c).some((n) => n > 0)) return `${q.name} jobs: ${JSON.stringify(c)}`
      }
      const pending = await env.db.selectFrom('webhook_deliveries').select('seq').executeTakeFirst()
      const outbox = await env.db.selectFrom('outbox').select('id').executeTakeFirst()
      return (pending === undefined && outbox === undefined) || 'deliveries or outbox rows pending'
    })
  } finally {
    await Promise.all(queues.map((q) => q.close()))
  }
}
