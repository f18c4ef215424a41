/**
 * `pnpm bench stream [--rate P] [--clients C] [--duration S]`: the writer stores Posts at a fixed
 * rate (default 1000/s) while C (default 100) clients hold filtered-stream connections, each app
 * with its own rules (every Post matches about a tenth of them). Measured: delivery latency from
 * commit to client (p50/p99) and messages/s delivered. Baseline, in the same run and with the same
 * Posts and recipients: a bare script that PUBLISHes each Post on Redis pub/sub and a bare
 * node:http server that writes it to the sockets of its recipients. Both servers run in their own
 * child process; the producer and the clients share this one. Last line: JSON with
 * `ratio` = stream messages/s ÷ baseline messages/s.
 */
import { spawn, type ChildProcess } from 'node:child_process'
import http from 'node:http'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import { loadConfig } from '@threadline/config'
import {
  addRules,
  createApp,
  createDb,
  ensureDatabase,
  migrateToLatest,
  withDatabase,
} from '@threadline/db'
import { formatPostTime, generateId, snowflakeTime } from '@threadline/domain'
import { silentLogger } from '@threadline/logger'
import { closeRedis, createRedis } from '@threadline/redis'
import { apiDepsFromConfig, apiOptionsFromConfig, createApi } from '@threadline/api'
import { createWriter, storeLines } from '@threadline/writer'
import { benchWriterOptions } from './lib/setup.js'
import { onStreamLines } from './lib/stream-lines.js'
import { percentile } from './lib/runs.js'

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    clients: { type: 'string', default: '100' },
    duration: { type: 'string', default: '10' },
    // The child processes' roles.
    'serve-api': { type: 'boolean', default: false },
    'serve-baseline': { type: 'boolean', default: false },
  },
})
const RATE = Number(values.rate)
const CLIENTS = Number(values.clients)
const DURATION_S = Number(values.duration)
const TICK_MS = 20
const GROUPS = 10

const config = loadConfig()
const benchUrl = withDatabase(config.DATABASE_URL, 'threadline_bench_stream')
const prefix = `bench-stream-${process.pid}`
const CHANNEL = `${prefix}:baseline`

// ------------------------------------------------------------------ child: the API under test

async function serveApi(): Promise<void> {
  const api = createApi(
    await apiDepsFromConfig(config, silentLogger()),
    apiOptionsFromConfig(config),
  )
  await api.start()
  process.stdout.write(`listening ${api.url()}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => void api.close())
}

// ------------------------------------------------------------------ child: the bare baseline

/** Clients connect to /?id=N; each Redis message `{to:[N…], line}` is written to those sockets. */
async function serveBaseline(): Promise<void> {
  const clients = new Map<number, http.ServerResponse>()
  const server = http.createServer((req, res) => {
    const id = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('id'))
    res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
    res.flushHeaders()
    res.socket?.setNoDelay(true)
    clients.set(id, res)
    res.on('close', () => clients.delete(id))
  })
  const sub = createRedis(config.REDIS_URL, 'worker', 'bench-baseline')
  // The parent passes its prefix as REDIS_PREFIX.
  await sub.subscribe(`${config.REDIS_PREFIX}:baseline`)
  sub.on('message', (_channel, message: string) => {
    const { to, line } = JSON.parse(message) as { to: number[]; line: string }
    for (const id of to) clients.get(id)?.write(line + '\r\n')
  })
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r))
  const { port } = server.address() as { port: number }
  process.stdout.write(`listening http://127.0.0.1:${port}\n`)
  process.stdin.resume()
  process.stdin.on('end', () => {
    for (const res of clients.values()) res.end()
    server.close()
    void sub.quit()
  })
}

// ------------------------------------------------------------------ main

function startChild(
  mode: string,
  env: Record<string, string>,
): Promise<{ child: ChildProcess; url: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', fileURLToPath(import.meta.url), mode], {
    stdio: ['pipe', 'pipe', 'inherit'],
    env: { ...process.env, ...env },
  })
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout! })
    lines.on('line', (line) => {
      const m = /^listening (\S+)/.exec(line)
      if (m) resolve({ child, url: m[1]! })
    })
    child.on('exit', (code) => reject(new Error(`${mode} exited with ${code}`)))
  })
}

async function stopChild(child: ChildProcess): Promise<void> {
  const exited = new Promise((r) => child.once('exit', r))
  child.stdin?.end()
  const timer = setTimeout(() => child.kill('SIGKILL'), 10_000)
  await exited
  clearTimeout(timer)
}

interface Reader {
  received: number
  close(): void
}

/** A stream client that records, for each message, now − the Post's commit time. */
function connect(
  url: string,
  headers: Record<string, string>,
  committed: Map<string, number>,
  latencies: number[],
): Promise<Reader> {
  const agent = new http.Agent({ keepAlive: false })
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers, agent }, (res) => {
      if (res.statusCode !== 200) {
        reject(new Error(`${url}: ${res.statusCode}`))
        return
      }
      const reader: Reader = { received: 0, close: () => req.destroy() }
      onStreamLines(res, (line) => {
        const now = performance.now()
        const id = /"id":"(\d+)"/.exec(line)?.[1]
        const at = id ? committed.get(id) : undefined
        if (at !== undefined) latencies.push(now - at)
        reader.received += 1
      })
      res.on('error', () => undefined)
      resolve(reader)
    })
    req.on('error', reject)
  })
}

/** Post n: tags #g<group> and #t<target>; client i holds #g<i % GROUPS> and #t<i>. */
function makePost(n: number): { id: string; line: string; to: number[] } {
  const id = generateId()
  const group = n % GROUPS
  const target = (n * 7) % CLIENTS
  const to = new Set<number>([target])
  for (let i = group; i < CLIENTS; i += GROUPS) to.add(i)
  const data = {
    id,
    text: `bench post ${n} #g${group} #t${target} ${'lorem ipsum '.repeat(10)}`,
    author_id: String(5000 + (n % 500)),
    created_at: formatPostTime(snowflakeTime(id)!),
    conversation_id: id,
    lang: 'en',
  }
  const author = { id: data.author_id, username: `bench_${n % 500}`, name: `Bench ${n % 500}` }
  return { id, line: JSON.stringify({ data, includes: { users: [author] } }), to: [...to] }
}

interface PhaseResult {
  p50_ms: number
  p99_ms: number
  msgs_per_s: number
  posts: number
  expected: number
  received: number
}

/** Sends RATE Posts/s for DURATION_S through `send`, then waits for deliveries to settle. */
async function runPhase(
  name: string,
  readers: Reader[],
  latencies: number[],
  send: (batch: Array<ReturnType<typeof makePost>>) => Promise<void>,
): Promise<PhaseResult> {
  const perTick = Math.max(1, Math.round((RATE * TICK_MS) / 1000))
  const ticks = Math.round((DURATION_S * 1000) / TICK_MS)
  let n = 0
  let expected = 0
  const start = performance.now()
  let lastLog = start
  for (let t = 0; t < ticks; t++) {
    const due = start + t * TICK_MS
    const wait = due - performance.now()
    if (wait > 0) await new Promise((r) => setTimeout(r, wait))
    const batch = Array.from({ length: perTick }, () => makePost(n++))
    for (const p of batch) expected += p.to.length
    await send(batch)
    if (performance.now() - lastLog > 2_000) {
      lastLog = performance.now()
      const got = readers.reduce((s, r) => s + r.received, 0)
      process.stdout.write(`${name}: ${n} Posts sent, ${got}/${expected} messages delivered\n`)
    }
  }
  const sentFor = (performance.now() - start) / 1000
  const deadline = performance.now() + 10_000
  let received = 0
  while (performance.now() < deadline) {
    received = readers.reduce((s, r) => s + r.received, 0)
    if (received >= expected) break
    await new Promise((r) => setTimeout(r, 50))
  }
  const elapsed = (performance.now() - start) / 1000
  const sorted = [...latencies].sort((a, b) => a - b)
  return {
    p50_ms: Math.round(percentile(sorted, 50) * 10) / 10,
    p99_ms: Math.round(percentile(sorted, 99) * 10) / 10,
    // Delivered over the sending window plus the time it took to drain.
    msgs_per_s: Math.round(received / Math.max(sentFor, elapsed)),
    posts: n,
    expected,
    received,
  }
}

async function main(): Promise<void> {
  await ensureDatabase(benchUrl)
  const db = createDb({ url: benchUrl, poolMax: 5, applicationName: 'bench-stream' })
  await migrateToLatest(db)
  process.stdout.write(`setting up ${CLIENTS} apps with rules\n`)
  const tokens: string[] = []
  for (let i = 0; i < CLIENTS; i++) {
    const app = await createApp(db, `bench stream ${i}`)
    await addRules(
      db,
      app.app_id,
      [{ value: `#g${i % GROUPS}`, tag: 'group' }, { value: `#t${i}` }],
      {
        cap: 1000,
      },
    )
    tokens.push(app.bearer_token)
  }

  // --- Threadline: writer → stored stream → API hub → clients
  const api = await startChild('--serve-api', {
    DATABASE_URL: benchUrl,
    REDIS_PREFIX: prefix,
    PORT: '0',
    LOG_LEVEL: 'warn',
    API_RATE_LIMITS: 'rules:1000000',
  })
  const writerRedis = createRedis(config.REDIS_URL, 'worker', 'bench-writer')
  const writer = createWriter(
    { db: createDb({ url: benchUrl, poolMax: 5 }), redis: writerRedis, logger: silentLogger() },
    { ...benchWriterOptions, prefix },
  )
  const committed = new Map<string, number>()
  const streamLatencies: number[] = []
  const streamReaders = await Promise.all(
    tokens.map((t) =>
      connect(
        `${api.url}/2/tweets/search/stream?tweet.fields=created_at,author_id&expansions=author_id`,
        { authorization: `Bearer ${t}` },
        committed,
        streamLatencies,
      ),
    ),
  )
  process.stdout.write(`stream: ${streamReaders.length} clients connected to ${api.url}\n`)
  let pending = Promise.resolve()
  const stream = await runPhase('stream', streamReaders, streamLatencies, async (batch) => {
    // One batch per tick, as the writer's posts jobs: commit, then the relay publishes.
    pending = pending.then(async () => {
      await storeLines(
        db,
        batch.map((p) => p.line),
        new Date().toISOString(),
        'bench',
      )
      const at = performance.now()
      for (const p of batch) committed.set(p.id, at)
      await writer.relay()
    })
  })
  await pending
  for (const r of streamReaders) r.close()
  await stopChild(api.child)
  await writer.close()

  // --- Baseline: PUBLISH → bare node:http fan-out → the same clients
  const base = await startChild('--serve-baseline', { REDIS_PREFIX: prefix })
  const pub = createRedis(config.REDIS_URL, 'producer', 'bench-publisher')
  const baseCommitted = new Map<string, number>()
  const baseLatencies: number[] = []
  const baseReaders = await Promise.all(
    tokens.map((_, i) => connect(`${base.url}/?id=${i}`, {}, baseCommitted, baseLatencies)),
  )
  const baseline = await runPhase('baseline', baseReaders, baseLatencies, async (batch) => {
    const pipeline = pub.pipeline()
    const at = performance.now()
    for (const p of batch) {
      baseCommitted.set(p.id, at)
      pipeline.publish(CHANNEL, JSON.stringify({ to: p.to, line: p.line }))
    }
    await pipeline.exec()
  })
  for (const r of baseReaders) r.close()
  await stopChild(base.child)
  await closeRedis(pub)
  const cleanup = createRedis(config.REDIS_URL, 'producer', 'bench-cleanup')
  await cleanup.del(`${prefix}:stored`)
  await closeRedis(cleanup)
  await db.destroy()

  process.stdout.write(
    `stream:   p50 ${stream.p50_ms} ms, p99 ${stream.p99_ms} ms, ${stream.msgs_per_s} msgs/s (${stream.received}/${stream.expected})\n` +
      `baseline: p50 ${baseline.p50_ms} ms, p99 ${baseline.p99_ms} ms, ${baseline.msgs_per_s} msgs/s (${baseline.received}/${baseline.expected})\n`,
  )
  process.stdout.write(
    JSON.stringify({
      posts_per_s: RATE,
      clients: CLIENTS,
      duration_s: DURATION_S,
      stream,
      baseline,
      ratio: Math.round((stream.msgs_per_s / baseline.msgs_per_s) * 1000) / 1000,
    }) + '\n',
  )
}

if (values['serve-api']) await serveApi()
else if (values['serve-baseline']) await serveBaseline()
else await main()
