/**
 * `pnpm bench latency [--rates 10,100,1000,5000] [--duration 20] [--drain 30] [--writers 1]`
 *
 * Real time end to end. The whole stack, each role in its own process as in production (`threadline
 * start --roles ingest | writer | api | delivery`), behind a fake X upstream in this process. One
 * app follows one conversation (a filtered-stream rule) and subscribes a webhook to `post.create`
 * by one author. At each offered rate, for `--duration` seconds, replies are written to the
 * upstream's stream socket one line at a time; measured here, on one clock, from the write of a
 * line to its arrival at the app's filtered-stream client, at a client of the conversation's live
 * feed (GET /2/conversations/:id/stream) and at the webhook receiver: p50, p99 and max, and the
 * Posts/s the stream client got against those offered. The webhook author writes at most
 * a hundred of the Posts a second (one webhook sends one request at a time: past that the bench
 * would measure its queue).
 *
 * Baseline, in the same run and alternating with each rate: a bare relay of the same lines from
 * an upstream's socket to a client's through one Node process and one Redis hop (XADD, then a
 * blocking XREAD of the same stream, as the API reads `stored`): the floor of any such design.
 *
 * Last line: JSON with the figures per rate, the targets, and `ratio` = the share of the targets
 * met (target_ratio 1).
 */
import { spawn, type ChildProcess } from 'node:child_process'
import http from 'node:http'
import type { AddressInfo } from 'node:net'
import { createInterface } from 'node:readline'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import { addRules, createApp, createWebhook } from '@threadline/db'
import { formatPostTime, generateId, snowflakeTime } from '@threadline/domain'
import { silentLogger } from '@threadline/logger'
import { createQueue, type PostsJob } from '@threadline/queue'
import { closeRedis, createRedis, tailStream } from '@threadline/redis'
import { FakeUpstream } from '../ingest/fake-upstream.js'
import { benchEnv, log } from './lib/setup.js'
import { onStreamLines } from './lib/stream-lines.js'
import { percentile } from './lib/runs.js'

const TOKEN = 'bench-token'
const ROOT_AUTHOR = '4000000'
const HOOK_AUTHOR = '4000001'
const AUTHORS = 500
/** Webhook events a second at most (see above). */
const HOOK_RATE = 100

// ------------------------------------------------------------------ child: the bare relay

/** Upstream socket → XADD → XREAD BLOCK → client socket, in this one process. */
async function serveRelay(upstreamUrl: string, redisUrl: string, key: string): Promise<void> {
  const producer = createRedis(redisUrl, 'producer', 'bench-relay')
  const clients = new Set<http.ServerResponse>()
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
    res.flushHeaders()
    clients.add(res)
    res.on('close', () => clients.delete(res))
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const tail = tailStream(producer, key, {
    name: 'bench-relay-tail',
    count: 1_000,
    blockMs: 5_000,
    onEntries: (raw) => {
      for (const [, fields] of raw) {
        for (const res of clients) res.write(`${fields[1]}\r\n`)
      }
    },
  })
  await tail.ready
  http.get(
    `${upstreamUrl}/2/tweets/search/stream`,
    { headers: { authorization: `Bearer ${TOKEN}` } },
    (res) =>
      onStreamLines(res, (line) => {
        void producer.xadd(key, 'MAXLEN', '~', '100000', '*', 'l', line)
      }),
  )
  process.stdout.write(`ready ${(server.address() as AddressInfo).port}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => {
    void tail.close().then(async () => {
      await closeRedis(producer)
      process.exit(0)
    })
  })
}

// ------------------------------------------------------------------ main: measuring

const round1 = (n: number) => Math.round(n * 10) / 10

interface Latencies {
  received: number
  expected: number
  p50_ms: number
  p99_ms: number
  max_ms: number
}

function latencies(values: number[], expected: number): Latencies {
  const sorted = [...values].sort((a, b) => a - b)
  return {
    received: values.length,
    expected,
    p50_ms: round1(percentile(sorted, 50)),
    p99_ms: round1(percentile(sorted, 99)),
    max_ms: round1(sorted[sorted.length - 1] ?? NaN),
  }
}

/** A reader of `\r\n`-framed JSON lines; calls `onPost` with each line's `data.id`. */
function openStreamClient(url: string, token: string, onPost: (id: string) => void) {
  return new Promise<http.ClientRequest>((resolve, reject) => {
    const req = http.get(url, { headers: { authorization: `Bearer ${token}` } }, (res) => {
      if (res.statusCode !== 200) {
        res.resume()
        reject(new Error(`stream answered ${res.statusCode}`))
        return
      }
      onStreamLines(res, (line) => {
        const id = (JSON.parse(line) as { data?: { id?: string } }).data?.id
        if (id) onPost(id)
      })
      resolve(req)
    })
    req.on('error', reject)
  })
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function until(what: string, check: () => boolean | Promise<boolean>, timeoutMs: number) {
  const deadline = performance.now() + timeoutMs
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(50)
  }
}

function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = http.createServer()
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as AddressInfo).port
      s.close(() => resolve(port))
    })
  })
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      rates: { type: 'string', default: '10,100,1000,5000' },
      // Long enough at 10/s for a p99 that is not simply the maximum (200 Posts).
      duration: { type: 'string', default: '20' },
      drain: { type: 'string', default: '30' },
      writers: { type: 'string', default: '1' },
    },
  })
  const RATES = values.rates.split(',').map(Number)
  const DURATION_MS = Number(values.duration) * 1000
  const DRAIN_MS = Number(values.drain) * 1000
  const WRITERS = Number(values.writers)
  const env = await benchEnv('latency')
  const children: ChildProcess[] = []
  const closers: Array<() => unknown> = []
  let summary: string | undefined
  try {
    // --- the upstreams: one for Threadline's ingest, one for the bare relay
    const upstream = await new FakeUpstream().start()
    const relayUpstream = await new FakeUpstream().start()
    closers.push(
      () => upstream.close(),
      () => relayUpstream.close(),
    )
    relayUpstream.rules.set('1', { id: '1', value: 'bench' })

    // --- the webhook receiver
    const hookReceived = new Map<string, number>()
    const receiver = http.createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const at = performance.now()
        if (req.method === 'POST') {
          const id = /"payload":\{"id":"(\d+)"/.exec(Buffer.concat(chunks).toString('utf8'))?.[1]
          if (id && !hookReceived.has(id)) hookReceived.set(id, at)
          res.writeHead(200).end()
        } else res.writeHead(404).end()
      })
    })
    await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r))
    closers.push(() => receiver.close())
    const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`

    // --- the app: one conversation on its filtered stream, one author on its webhook
    const rootId = generateId()
    const app = await createApp(env.db, 'bench latency')
    await addRules(env.db, app.app_id, [{ value: `conversation_id:${rootId}` }], { cap: 1000 })
    const hook = await createWebhook(env.db, app.app_id, `${receiverUrl}/hook`, { cap: 10 })
    await env.db
      .insertInto('activity_subscriptions')
      .values({
        id: generateId(),
        app_id: app.app_id,
        event_type: 'post.create',
        filter_user_id: HOOK_AUTHOR,
        filter_keyword: null,
        tag: 'bench',
        webhook_id: hook!.id,
      })
      .execute()

    // --- the roles, each its own process
    const port = await freePort()
    const roleEnv = {
      ...process.env,
      DATABASE_URL: env.databaseUrl,
      REDIS_URL: env.redisUrl,
      REDIS_PREFIX: env.prefix,
      LOG_LEVEL: 'warn',
      METRICS_PORT: '0',
      PORT: String(port),
      UPSTREAM_URL: upstream.url,
      UPSTREAM_BEARER_TOKEN: TOKEN,
      WEBHOOK_ALLOW_PRIVATE: 'true',
      NODE_OPTIONS: '--max-semi-space-size=32',
    }
    const cli = fileURLToPath(new URL('../../packages/cli/src/main.ts', import.meta.url))
    let stopping = false
    closers.push(() => (stopping = true))
    const roles = ['api', 'delivery', ...Array.from({ length: WRITERS }, () => 'writer'), 'ingest']
    for (const role of roles) {
      const child = spawn(process.execPath, ['--import', 'tsx', cli, 'start', '--roles', role], {
        env: roleEnv,
        stdio: ['ignore', 'inherit', 'inherit'],
      })
      child.once('exit', (code, signal) => {
        if (!stopping) log(`${role} exited (${signal ?? code})`)
      })
      children.push(child)
    }

    const relay = await new Promise<{ child: ChildProcess; port: number }>((resolve, reject) => {
      const child = spawn(
        process.execPath,
        [
          '--import',
          'tsx',
          fileURLToPath(import.meta.url),
          '--serve-relay',
          relayUpstream.url,
          env.redisUrl,
          `${env.prefix}:relay`,
        ],
        { stdio: ['pipe', 'pipe', 'inherit'] },
      )
      children.push(child)
      createInterface({ input: child.stdout! }).on('line', (line) => {
        const m = /^ready (\d+)$/.exec(line)
        if (m) resolve({ child, port: Number(m[1]) })
      })
      child.once('exit', (code) => reject(new Error(`the relay exited with ${code}`)))
    })

    // --- clients
    const streamReceived = new Map<string, number>()
    const relayReceived = new Map<string, number>()
    await until('the ingest on the upstream stream', () => upstream.openStreams === 1, 60_000)
    await until('the relay on its upstream stream', () => relayUpstream.openStreams === 1, 10_000)
    let client: http.ClientRequest | undefined
    await until(
      'the API',
      async () => {
        client = await openStreamClient(
          `http://127.0.0.1:${port}/2/tweets/search/stream`,
          app.bearer_token,
          (id) => {
            if (!streamReceived.has(id)) streamReceived.set(id, performance.now())
          },
        ).catch(() => undefined)
        return client !== undefined
      },
      60_000,
    )
    // The conversation's own live feed (docs/api.md §5), no rule needed.
    const feedReceived = new Map<string, number>()
    const feedClient = await openStreamClient(
      `http://127.0.0.1:${port}/2/conversations/${rootId}/stream`,
      app.bearer_token,
      (id) => {
        if (!feedReceived.has(id)) feedReceived.set(id, performance.now())
      },
    )
    const relayClient = await openStreamClient(`http://127.0.0.1:${relay.port}/`, '', (id) => {
      if (!relayReceived.has(id)) relayReceived.set(id, performance.now())
    })
    closers.push(
      () => client?.destroy(),
      () => feedClient.destroy(),
      () => relayClient.destroy(),
    )

    // --- the Posts: replies in one conversation, the webhook author's among them
    const matching = JSON.stringify([{ id: '1', tag: '' }])
    const makeLine = (author: string) => {
      const id = generateId()
      const data = {
        id,
        text: `bench reply ${id} ${'lorem ipsum '.repeat(8)}`,
        author_id: author,
        created_at: formatPostTime(snowflakeTime(id)!),
        conversation_id: rootId,
        in_reply_to_user_id: ROOT_AUTHOR,
        referenced_tweets: [{ type: 'replied_to', id: rootId }],
        lang: 'en',
        edit_history_tweet_ids: [id],
        public_metrics: { retweet_count: 0, reply_count: 0, like_count: 1, quote_count: 0 },
      }
      const users = [{ id: author, username: `bench_${author}`, name: `Bench ${author}` }]
      const line = `{"data":${JSON.stringify(data)},"includes":${JSON.stringify({ users })},"matching_rules":${matching}}`
      return { id, line }
    }

    interface Phase {
      sent: Map<string, number>
      hookIds: Set<string>
      firstAt: number
      lastAt: number
    }
    /** Writes `rate` lines a second for the duration, each on its own, timestamped as written. */
    const offer = async (to: FakeUpstream, rate: number, durationMs: number): Promise<Phase> => {
      const total = Math.max(1, Math.round((rate * durationMs) / 1000))
      const every = Math.max(1, Math.round(rate / HOOK_RATE))
      const lines = Array.from({ length: total }, (_, i) =>
        makeLine(i % every === 0 ? HOOK_AUTHOR : String(5_000_000 + (i % AUTHORS))),
      )
      const hookIds = new Set(lines.filter((_, i) => i % every === 0).map((l) => l.id))
      const sent = new Map<string, number>()
      const start = performance.now()
      let i = 0
      while (i < total) {
        const due = Math.min(total, Math.floor(((performance.now() - start) * rate) / 1000) + 1)
        for (; i < due; i++) {
          sent.set(lines[i]!.id, performance.now())
          to.sendRaw(lines[i]!.line)
        }
        if (i < total) await sleep(Math.max(0, start + (i * 1000) / rate - performance.now()))
      }
      return { sent, hookIds, firstAt: start, lastAt: performance.now() }
    }
    /** Waits for every Post of a phase at the clients; `stack`: also at the feed and the webhook. */
    const settle = async (phase: Phase, received: Map<string, number>, stack: boolean) => {
      const all = () =>
        [...phase.sent.keys()].every(
          (id) => received.has(id) && (!stack || feedReceived.has(id)),
        ) &&
        (!stack || [...phase.hookIds].every((id) => hookReceived.has(id)))
      await until('every Post received', all, DRAIN_MS).catch((err: Error) => log(err.message))
    }
    const measure = (phase: Phase, received: Map<string, number>) => {
      const lat: number[] = []
      let last = phase.firstAt
      for (const [id, at] of phase.sent) {
        const got = received.get(id)
        if (got === undefined) continue
        lat.push(got - at)
        last = Math.max(last, got)
      }
      const offeredPerS = (phase.sent.size * 1000) / Math.max(1, phase.lastAt - phase.firstAt)
      const keptPerS = (lat.length * 1000) / Math.max(1, last - phase.firstAt)
      return {
        ...latencies(lat, phase.sent.size),
        offered_per_s: Math.round(offeredPerS),
        received_per_s: Math.round(keptPerS),
      }
    }
    const hookFigures = (phase: Phase) => {
      const lat: number[] = []
      for (const id of phase.hookIds) {
        const got = hookReceived.get(id)
        if (got !== undefined) lat.push(got - phase.sent.get(id)!)
      }
      return latencies(lat, phase.hookIds.size)
    }

    // Warm-up, untimed: the roles' code compiled, their connections open.
    log('warm-up: 200 Posts at 100/s through both')
    for (const [to, received, hooks] of [
      [upstream, streamReceived, true],
      [relayUpstream, relayReceived, false],
    ] as const) {
      await settle(await offer(to, 100, 2_000), received, hooks)
    }

    // The stream's `posts` jobs of a phase: how the ingest batched (BullMQ keeps the last
    // thousand completed jobs; a job's timestamp is when it was added, on the wall clock).
    const queueRedis = createRedis(env.redisUrl, 'producer', 'bench-latency-queue')
    const postsQueue = createQueue<PostsJob>('posts', {
      connection: queueRedis,
      prefix: env.prefix,
      logger: silentLogger(),
    })
    closers.push(async () => {
      await postsQueue.close()
      await closeRedis(queueRedis)
    })
    const wall = (t: number) => performance.timeOrigin + t
    const batching = async (phase: Phase) => {
      const jobs = (await postsQueue.getJobs(['completed'], 0, 999)).filter(
        (j) =>
          j.data.source === 'stream' &&
          j.timestamp >= wall(phase.firstAt) &&
          j.timestamp <= wall(phase.lastAt) + DRAIN_MS,
      )
      const lines = jobs.map((j) => j.data.count)
      return {
        jobs: jobs.length,
        lines_per_job: round1(lines.reduce((a, b) => a + b, 0) / Math.max(1, jobs.length)),
        max_lines: Math.max(0, ...lines),
      }
    }

    const results: Array<Record<string, unknown>> = []
    for (const rate of RATES) {
      const t = await offer(upstream, rate, DURATION_MS)
      await settle(t, streamReceived, true)
      const stream = measure(t, streamReceived)
      const feed = measure(t, feedReceived)
      const webhook = hookFigures(t)
      const batches = await batching(t)
      const b = await offer(relayUpstream, rate, DURATION_MS)
      await settle(b, relayReceived, false)
      const baseline = measure(b, relayReceived)
      const row = { rate, stream, feed, webhook, baseline, batches }
      results.push(row)
      log(
        `${rate}/s: stream p50 ${stream.p50_ms} p99 ${stream.p99_ms} max ${stream.max_ms} ms ` +
          `(${stream.received}/${stream.expected}, ${stream.received_per_s}/s of ${stream.offered_per_s}/s); ` +
          `feed p50 ${feed.p50_ms} p99 ${feed.p99_ms} max ${feed.max_ms} ms; ` +
          `webhook p50 ${webhook.p50_ms} p99 ${webhook.p99_ms} max ${webhook.max_ms} ms ` +
          `(${webhook.received}/${webhook.expected}); ` +
          `bare relay p50 ${baseline.p50_ms} p99 ${baseline.p99_ms} max ${baseline.max_ms} ms; ` +
          `${batches.jobs} jobs, ${batches.lines_per_job} lines a job (max ${batches.max_lines})`,
      )
    }

    // Targets (test/bench/README.md): stream p50 ≤ 15 and p99 ≤ 50 ms up to 1,000/s, p99 ≤
    // 250 ms at 5,000/s; webhook p99 ≤ 100 ms up to 100/s; every Post delivered.
    const checks: Array<{ target: string; met: boolean }> = []
    for (const r of results as Array<{
      rate: number
      stream: Latencies
      webhook: Latencies
    }>) {
      const complete = r.stream.received === r.stream.expected
      if (r.rate <= 1_000) {
        checks.push({
          target: `${r.rate}/s stream p50 ≤ 15 ms`,
          met: complete && r.stream.p50_ms <= 15,
        })
        checks.push({
          target: `${r.rate}/s stream p99 ≤ 50 ms`,
          met: complete && r.stream.p99_ms <= 50,
        })
      } else {
        checks.push({
          target: `${r.rate}/s stream p99 ≤ 250 ms`,
          met: complete && r.stream.p99_ms <= 250,
        })
      }
      if (r.rate <= 100) {
        checks.push({
          target: `${r.rate}/s webhook p99 ≤ 100 ms`,
          met: r.webhook.received === r.webhook.expected && r.webhook.p99_ms <= 100,
        })
      }
    }
    const missed = checks.filter((c) => !c.met).map((c) => c.target)
    log(missed.length === 0 ? 'every target met' : `targets missed: ${missed.join('; ')}`)
    summary = JSON.stringify({
      bench: 'latency',
      duration_s: DURATION_MS / 1000,
      writers: WRITERS,
      results,
      targets_met: checks.length - missed.length,
      targets: checks.length,
      missed,
      ratio: Number(((checks.length - missed.length) / Math.max(1, checks.length)).toFixed(3)),
      target_ratio: 1,
    })
  } finally {
    for (const close of closers.reverse()) await close()
    await Promise.all(
      children.map(
        (child) =>
          new Promise<void>((resolve) => {
            if (child.exitCode !== null || child.signalCode !== null) return resolve()
            const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
            child.once('exit', () => {
              clearTimeout(timer)
              resolve()
            })
            child.stdin?.end()
            child.kill('SIGTERM')
          }),
      ),
    )
    await env.close()
  }
  // After the roles have stopped, so that nothing they log comes after the figures.
  if (summary) console.log(summary)
}

if (process.argv[2] === '--serve-relay') {
  await serveRelay(process.argv[3]!, process.argv[4]!, process.argv[5]!)
} else {
  await main()
}
