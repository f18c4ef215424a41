/**
 * `pnpm bench delivery [--rate 300] [--duration 15] [--subscriptions 10000] [--apps 5]
 * [--webhooks-per-app 2]`
 *
 * Threadline: S subscriptions spread over A apps (75% `post.create` by author, 20%
 * `post.reply.create` by replied-to user, 5% `post.create` keyword), each pointing at one of the
 * app's W webhooks, all served by a node:http receiver on 127.0.0.1 in this process. Posts are
 * stored at a fixed rate through the real writer (storeLines + relay, as a `posts` job does), the
 * real delivery service runs in its own process (WEBHOOK_ALLOW_PRIVATE=true, configuration
 * defaults otherwise) and POSTs the events. Measured at the receiver: events/s delivered and
 * latency from the Post's commit to the webhook's receipt (p50/p99), plus duplicates, missing
 * events and bad signatures.
 *
 * Baseline, in the same run: a bare process POSTs exactly the envelopes the receiver got, signed
 * the same way, to the same receiver, with the same concurrency (one request in flight per webhook,
 * A×W webhooks at once, over a keep-alive agent), each event released at the same offset from the
 * start as its Post was committed in the first phase: the same offered load. Its latency runs from
 * that release to receipt.
 *
 * `ratio` = delivered events/s ÷ baseline events/s, each = events received ÷ seconds from the
 * phase's start to its last receipt. Both phases are offered the same events on the same schedule,
 * so 1.0 means delivery kept up as well as a bare POST loop; below 1 it fell behind.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import { createHmac } from 'node:crypto'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { loadConfig } from '@threadline/config'
import { createApp, createDb, createWebhook, sql } from '@threadline/db'
import {
  createDelivery,
  deliveryDepsFromConfig,
  deliveryOptionsFromConfig,
} from '@threadline/delivery'
import { formatPostTime, generateId, snowflakeTime } from '@threadline/domain'
import { createLogger, silentLogger } from '@threadline/logger'
import { createQueue } from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import { runUntilSignal } from '@threadline/runtime'
import { createWriter, storeLines } from '@threadline/writer'
import { benchEnv, benchWriterOptions, log } from './lib/setup.js'
import { percentile } from './lib/runs.js'

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes. */
const now = () => performance.timeOrigin + performance.now()

// ------------------------------------------------------------------ child: the delivery service

async function serveDelivery(): Promise<void> {
  const config = loadConfig()
  const logger = createLogger({ level: config.LOG_LEVEL, name: 'bench-delivery' })
  const delivery = createDelivery(
    await deliveryDepsFromConfig(config, logger),
    deliveryOptionsFromConfig(config),
  )
  // Starts it, and closes it on SIGTERM.
  await runUntilSignal([delivery], logger, config.SHUTDOWN_TIMEOUT_MS)
  process.stdout.write('ready\n')
}

// ------------------------------------------------------------------ child: the bare baseline

interface BaselineEvent {
  /** When it is offered, in ms from the baseline's start. */
  offset: number
  body: string
}

interface BaselinePlan {
  receiver: string
  /** Per webhook: its path at the receiver, the app's secret, its events in delivery order. */
  hooks: Array<{ path: string; secret: string; events: BaselineEvent[] }>
}

/** One sequential sender per webhook (the delivery service's concurrency), each on a timetable. */
async function runBaseline(planFile: string): Promise<void> {
  const plan = JSON.parse(readFileSync(planFile, 'utf8')) as BaselinePlan
  const agent = new http.Agent({ keepAlive: true, maxSockets: plan.hooks.length })
  const url = new URL(plan.receiver)
  const post = (path: string, body: string, secret: string, at: number) =>
    new Promise<void>((resolve, reject) => {
      const bytes = Buffer.from(body, 'utf8')
      const req = http.request(
        {
          host: url.hostname,
          port: url.port,
          path,
          method: 'POST',
          agent,
          headers: {
            'content-type': 'application/json; charset=utf-8',
            'content-length': String(bytes.length),
            'x-twitter-webhooks-signature': `sha256=${createHmac('sha256', secret).update(bytes).digest('base64')}`,
            'x-bench-at': String(at),
          },
        },
        (res) => {
          res.resume()
          res.on('end', () =>
            res.statusCode === 200 ? resolve() : reject(new Error(`${res.statusCode}`)),
          )
        },
      )
      req.on('error', reject)
      req.end(bytes)
    })
  // The clock starts once this process is up (its start-up is not the baseline's latency).
  const start = now() + 100
  process.stdout.write(`ready ${start}\n`)
  await Promise.all(
    plan.hooks.map(async (hook) => {
      for (const e of hook.events) {
        const at = start + e.offset
        const wait = at - now()
        if (wait > 0) await new Promise((r) => setTimeout(r, wait))
        await post(hook.path, e.body, hook.secret, at)
      }
    }),
  )
  agent.destroy()
}

// ------------------------------------------------------------------ main

function startChild(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ child: ChildProcess; exited: Promise<number | null>; said: string }> {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', fileURLToPath(import.meta.url), ...args],
    { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, ...env } },
  )
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  return new Promise((resolve, reject) => {
    createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /^ready ?(.*)$/.exec(line)
      if (m) resolve({ child, exited, said: m[1]! })
    })
    void exited.then((code) => reject(new Error(`${args[0]} exited with ${code}`)))
  })
}

/** A small deterministic PRNG, so runs offer the same workload. */
function prng(seed: number): () => number {
  let s = seed >>> 0
  return () => {
    s = (s + 0x6d2b79f5) >>> 0
    let t = s
    t = Math.imul(t ^ (t >>> 15), t | 1)
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61)
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296
  }
}

const round1 = (n: number) => Math.round(n * 10) / 10

interface Receipt {
  hook: number
  body: string
  /** Receipt minus commit (Threadline) or minus release (baseline), ms. */
  latency: number
  at: number
}

interface PhaseFigures {
  events: number
  events_per_s: number
  p50_ms: number
  p99_ms: number
  max_ms: number
}

function figures(receipts: Receipt[], startedAt: number): PhaseFigures {
  const sorted = receipts.map((r) => r.latency).sort((a, b) => a - b)
  const last = Math.max(...receipts.map((r) => r.at))
  return {
    events: receipts.length,
    events_per_s: Math.round(receipts.length / ((last - startedAt) / 1000)),
    p50_ms: round1(percentile(sorted, 50)),
    p99_ms: round1(percentile(sorted, 99)),
    max_ms: round1(sorted[sorted.length - 1] ?? NaN),
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rate: { type: 'string', default: '300' },
      duration: { type: 'string', default: '15' },
      subscriptions: { type: 'string', default: '10000' },
      apps: { type: 'string', default: '5' },
      'webhooks-per-app': { type: 'string', default: '2' },
    },
  })
  const RATE = Number(values.rate)
  const DURATION_S = Number(values.duration)
  const SUBSCRIPTIONS = Number(values.subscriptions)
  const APPS = Number(values.apps)
  const WEBHOOKS_PER_APP = Number(values['webhooks-per-app'])
  const AUTHORS = 2_000
  const KEYWORDS = 200
  const TICK_MS = 20
  // Subscriptions are distinct (app, event type, filter, webhook); three in four are a
  // post.create by one of AUTHORS authors, so more than this many per webhook cannot be made.
  const maxSubscriptions = Math.floor((AUTHORS * 20) / 15) * APPS * WEBHOOKS_PER_APP
  if (!(SUBSCRIPTIONS > 0 && SUBSCRIPTIONS <= maxSubscriptions)) {
    console.error(
      `bench delivery: --subscriptions must be from 1 to ${maxSubscriptions} for ${APPS} app(s) × ` +
        `${WEBHOOKS_PER_APP} webhook(s) (distinct filters run out past it); got ${values.subscriptions}`,
    )
    process.exit(2)
  }
  const rand = prng(7)
  const pick = (n: number) => Math.floor(rand() * n)
  const authorId = (i: number) => String(3_000_000 + i)

  const env = await benchEnv('delivery')
  const tmp = mkdtempSync(join(tmpdir(), 'bench-delivery-'))
  const children: ChildProcess[] = []
  try {
    // --- the receiver: both phases POST here; /d/<hook> from Threadline, /b/<hook> the baseline
    const secrets: string[] = []
    const committed = new Map<string, number>()
    const delivered: Receipt[] = []
    const baseline: Receipt[] = []
    let badSignatures = 0
    const receiver = http.createServer((req, res) => {
      const [, phase, hookText] = (req.url ?? '').split('/')
      const hook = Number(hookText)
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const at = now()
        const raw = Buffer.concat(chunks)
        if (req.method === 'GET') {
          res.writeHead(404).end()
          return
        }
        const expected = `sha256=${createHmac('sha256', secrets[hook] ?? '')
          .update(raw)
          .digest('base64')}`
        if (req.headers['x-twitter-webhooks-signature'] !== expected) badSignatures += 1
        const body = raw.toString('utf8')
        if (phase === 'd') {
          const postId = /"payload":\{"id":"(\d+)"/.exec(body)?.[1]
          const c = postId ? committed.get(postId) : undefined
          delivered.push({ hook, body, latency: c === undefined ? NaN : at - c, at })
        } else {
          baseline.push({ hook, body, latency: at - Number(req.headers['x-bench-at']), at })
        }
        res.writeHead(200).end()
      })
    })
    // Many short connections (the delivery service opens one per request).
    receiver.keepAliveTimeout = 5_000
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r))
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

    // --- apps, webhooks, subscriptions
    log(`setting up ${APPS} apps × ${WEBHOOKS_PER_APP} webhooks and ${SUBSCRIPTIONS} subscriptions`)
    const hooks: Array<{ id: string; appId: string }> = []
    const appHooks: number[][] = []
    const appIds: string[] = []
    for (let a = 0; a < APPS; a++) {
      const app = await createApp(env.db, `bench delivery ${a}`)
      appIds.push(app.app_id)
      appHooks.push([])
      for (let w = 0; w < WEBHOOKS_PER_APP; w++) {
        const index = hooks.length
        const hook = await createWebhook(env.db, app.app_id, `${receiverUrl}/d/${index}`, {
          cap: 1_000,
        })
        hooks.push({ id: hook!.id, appId: app.app_id })
        secrets.push(app.consumer_secret)
        appHooks[a]!.push(index)
      }
    }
    // Expected events per Post, from the same subscriptions.
    const byUser = new Map<string, number>()
    const byKeyword = new Map<string, number>()
    const seen = new Set<string>()
    const rows: Array<{
      id: string
      app_id: string
      event_type: string
      filter_user_id: string | null
      filter_keyword: string | null
      tag: string
      webhook_id: string
    }> = []
    while (rows.length < SUBSCRIPTIONS) {
      const i = rows.length
      const a = pick(APPS)
      const hook = appHooks[a]![pick(WEBHOOKS_PER_APP)]!
      const kind = i % 20
      const eventType = kind < 15 ? 'post.create' : kind < 19 ? 'post.reply.create' : 'post.create'
      const user = kind < 19 ? authorId(pick(AUTHORS)) : null
      const keyword = kind === 19 ? `kw${pick(KEYWORDS)}` : null
      const key = `${a} ${eventType} ${user} ${keyword} ${hook}`
      if (seen.has(key)) continue
      seen.add(key)
      if (user) byUser.set(`${eventType} ${user}`, (byUser.get(`${eventType} ${user}`) ?? 0) + 1)
      else byKeyword.set(keyword!, (byKeyword.get(keyword!) ?? 0) + 1)
      rows.push({
        id: generateId(),
        app_id: appIds[a]!,
        event_type: eventType,
        filter_user_id: user,
        filter_keyword: keyword,
        tag: `bench ${kind}`,
        webhook_id: hooks[hook]!.id,
      })
    }
    for (let i = 0; i < rows.length; i += 1_000) {
      await env.db
        .insertInto('activity_subscriptions')
        .values(rows.slice(i, i + 1_000))
        .execute()
    }

    // --- Threadline: writer (here) → activity jobs → delivery (its own process) → receiver
    const delivery = await startChild(['--serve-delivery'], {
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.prefix,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      LOG_LEVEL: 'warn',
    })
    children.push(delivery.child)
    const writer = createWriter(
      {
        db: createDb({ url: env.databaseUrl, poolMax: 4, applicationName: 'bench-writer' }),
        redis: createRedis(env.redisUrl, 'worker', 'bench-writer'),
        logger: silentLogger(),
      },
      { ...benchWriterOptions, prefix: env.prefix },
    )

    const storedIds: string[] = []
    const makePost = () => {
      const id = generateId()
      const author = pick(AUTHORS)
      const data: Record<string, unknown> = {
        id,
        text: `bench post ${id} ${rand() < 0.2 ? `about kw${pick(KEYWORDS)} ` : ''}${'lorem ipsum '.repeat(8)}`,
        author_id: authorId(author),
        created_at: formatPostTime(snowflakeTime(id)!),
        conversation_id: id,
        lang: 'en',
      }
      let expected = byUser.get(`post.create ${authorId(author)}`) ?? 0
      for (const [kw, n] of byKeyword) if ((data.text as string).includes(` ${kw} `)) expected += n
      if (storedIds.length > 0 && rand() < 0.3) {
        const to = authorId((author + 1 + pick(AUTHORS - 1)) % AUTHORS)
        const parent = storedIds[pick(storedIds.length)]!
        data.in_reply_to_user_id = to
        data.referenced_tweets = [{ type: 'replied_to', id: parent }]
        data.conversation_id = parent
        expected += byUser.get(`post.reply.create ${to}`) ?? 0
      }
      const user = { id: authorId(author), username: `bench_${author}`, name: `Bench ${author}` }
      return { id, line: JSON.stringify({ data, includes: { users: [user] } }), expected }
    }

    const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000))
    const ticks = Math.round((DURATION_S * 1000) / TICK_MS)
    log(
      `threadline: ${perTick * ticks} Posts at ${RATE}/s for ${DURATION_S} s → delivery → ${hooks.length} webhooks`,
    )
    // Where a backlog builds: activity jobs not yet turned into events, or events queued for
    // their webhooks (progress lines only; polled every 2 s).
    const progressRedis = createRedis(env.redisUrl, 'producer', 'bench-progress')
    const activityQueue = createQueue('activity', {
      connection: progressRedis,
      prefix: env.prefix,
      logger: silentLogger(),
    })
    const backlog = async () => {
      const jobs = await activityQueue.getJobCounts('waiting', 'active', 'delayed')
      const { rows } = await sql<{ n: string }>`
        SELECT count(*)::text AS n FROM webhook_deliveries`.execute(env.db)
      return `backlog: ${Object.values(jobs).reduce((a, b) => a + b, 0)} activity jobs, ${rows[0]!.n} events queued for webhooks`
    }
    let expected = 0
    let posts = 0
    let pending = Promise.resolve()
    const start = now()
    let lastLog = start
    for (let t = 0; t < ticks; t++) {
      const wait = start + t * TICK_MS - now()
      if (wait > 0) await new Promise((r) => setTimeout(r, wait))
      const batch = Array.from({ length: perTick }, makePost)
      for (const p of batch) expected += p.expected
      posts += batch.length
      // One batch per tick, as a `posts` job: commit, then the relay enqueues its activity job.
      pending = pending.then(async () => {
        await storeLines(
          env.db,
          batch.map((p) => p.line),
          new Date().toISOString(),
          'bench',
        )
        const at = now()
        for (const p of batch) {
          committed.set(p.id, at)
          storedIds.push(p.id)
        }
        await writer.relay()
      })
      if (now() - lastLog > 2_000) {
        lastLog = now()
        log(
          `  ${posts} Posts offered, ${delivered.length}/${expected} events delivered; ${await backlog()}`,
        )
      }
    }
    await pending
    const sentFor = (now() - start) / 1000
    const drainDeadline = now() + 60_000
    while (delivered.length < expected && now() < drainDeadline) {
      await new Promise((r) => setTimeout(r, 50))
      if (now() - lastLog > 2_000) {
        lastLog = now()
        log(`  draining: ${delivered.length}/${expected} events delivered; ${await backlog()}`)
      }
    }
    // A moment for anything beyond the expected count (a duplicate) to show up.
    await new Promise((r) => setTimeout(r, 500))
    const threadline = figures(delivered, start)
    const uuids = new Set<string>()
    let duplicates = 0
    // Per subscription (webhook + event type + filter identify one here), an event whose Post was
    // committed before the previous event's Post arrived out of order.
    const lastCommit = new Map<string, number>()
    let outOfOrder = 0
    for (const r of delivered) {
      const uuid = /"event_uuid":"(\d+)"/.exec(r.body)?.[1] ?? ''
      if (uuids.has(uuid)) duplicates += 1
      uuids.add(uuid)
      const { data } = JSON.parse(r.body) as {
        data: { event_type: string; filter: unknown; payload: { id: string } }
      }
      const key = `${r.hook} ${data.event_type} ${JSON.stringify(data.filter)}`
      const at = committed.get(data.payload.id) ?? 0
      if (at < (lastCommit.get(key) ?? 0)) outOfOrder += 1
      else lastCommit.set(key, at)
    }
    log(
      `threadline: ${threadline.events}/${expected} events, ${threadline.events_per_s}/s, p50 ${threadline.p50_ms} ms, p99 ${threadline.p99_ms} ms, ${duplicates} duplicates, ${outOfOrder} out of order, ${badSignatures} bad signatures`,
    )
    await writer.close()
    await activityQueue.close()
    await closeRedis(progressRedis)
    delivery.child.kill('SIGTERM')
    await delivery.exited

    // --- Baseline: the same envelopes, on the same timetable, per webhook, one at a time
    const plan: BaselinePlan = {
      receiver: receiverUrl,
      hooks: hooks.map((_, i) => ({ path: `/b/${i}`, secret: secrets[i]!, events: [] })),
    }
    for (const r of delivered) {
      const postId = /"payload":\{"id":"(\d+)"/.exec(r.body)?.[1]
      const offset = (committed.get(postId ?? '') ?? start) - start
      plan.hooks[r.hook]!.events.push({ offset, body: r.body })
    }
    const planFile = join(tmp, 'plan.json')
    writeFileSync(planFile, JSON.stringify(plan))
    log(`baseline: the same ${delivered.length} envelopes from a bare POST loop per webhook`)
    const signaturesBefore = badSignatures
    const bare = await startChild(['--baseline', planFile])
    children.push(bare.child)
    const baseStart = Number(bare.said)
    const code = await bare.exited
    if (code !== 0) throw new Error(`the baseline exited with ${code}`)
    const base = figures(baseline, baseStart)
    log(
      `baseline:   ${base.events} events, ${base.events_per_s}/s, p50 ${base.p50_ms} ms, p99 ${base.p99_ms} ms`,
    )

    receiver.close()
    receiver.closeAllConnections()
    const cleanup = createRedis(env.redisUrl, 'producer', 'bench-cleanup')
    const keys = await cleanup.keys(`${env.prefix}:*`)
    if (keys.length > 0) await cleanup.del(...keys)
    await closeRedis(cleanup)

    console.log(
      JSON.stringify({
        bench: 'delivery',
        subscriptions: rows.length,
        apps: APPS,
        webhooks: hooks.length,
        posts_per_s: RATE,
        duration_s: DURATION_S,
        posts,
        offered_events_per_s: Math.round(expected / sentFor),
        expected_events: expected,
        threadline: {
          ...threadline,
          missing: expected - uuids.size,
          duplicates,
          out_of_order: outOfOrder,
          bad_signatures: signaturesBefore,
        },
        baseline: { ...base, bad_signatures: badSignatures - signaturesBefore },
        ratio: Math.round((threadline.events_per_s / base.events_per_s) * 1000) / 1000,
      }),
    )
  } finally {
    for (const c of children) if (c.exitCode === null) c.kill('SIGKILL')
    rmSync(tmp, { recursive: true, force: true })
    await env.close()
  }
}

const mode = process.argv[2]
if (mode === '--serve-delivery') await serveDelivery()
else if (mode === '--baseline') await runBaseline(process.argv[3]!)
else await main()
