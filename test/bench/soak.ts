import { parseArgs } from 'node:util'
import { sql } from '@threadline/db'
import { silentLogger } from '@threadline/logger'
import { createQueue } from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import { startSearchPoller, startStreamReader, StatusTally } from '../chaos/clients.js'
import { findBinaries, startStack, type MemorySample, type ServiceProcess } from '../chaos/stack.js'

/**
 * `pnpm bench soak [--minutes 2] [--rate 40]`: the whole stack (simulator, ingest, two writers, API,
 * delivery when it exists) as separate processes over a private Postgres and Redis, at a steady
 * rate for N minutes, with a filtered-stream client and a search poller reading. Reports each
 * service's heap and RSS at start and end, the `posts` queue depth, and latency drift.
 *
 * Latency is a Post's creation at the simulator (its snowflake time) to its arrival on the API's
 * filtered stream (ingest → queue → writer commit → relay → `stored` stream → API): the p50 of the
 * first minute is the baseline. `ratio` = p50 of the last minute / p50 of the first (1.0: no drift).
 */
const { values } = parseArgs({
  options: {
    minutes: { type: 'string', default: '2' },
    rate: { type: 'string', default: '40' },
  },
})
const minutes = Number(values.minutes)
const rate = Number(values.rate)
if (!(minutes > 0) || !(rate > 0)) {
  console.error('usage: pnpm bench soak [--minutes N] [--rate POSTS_PER_SECOND]')
  process.exit(2)
}
const binaries = findBinaries()
if (!binaries.ok) {
  console.error(`soak: cannot run: ${binaries.reason}`)
  process.exit(1)
}

const WINDOW_MS = Math.min(60_000, (minutes * 60_000) / 3)
const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))
const mb = (b: number | undefined) => (b === undefined ? null : Math.round(b / 1024 / 102.4) / 10)

function p(values: number[], q: number): number | null {
  if (values.length === 0) return null
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!
}

const { ROLES } = await import('../../packages/cli/src/index.js')
console.log(`soak: starting the stack (rate ${rate}/s for ${minutes} min)…`)
const stack = await startStack(binaries.bin, {
  simulatorRate: rate,
  writers: 2,
  extraRoles: 'delivery' in ROLES ? ['delivery'] : [],
  tuning: { api: { stream: { maxBufferedBytes: 4 * 1024 * 1024 } } },
})
const redis = createRedis(stack.redis.url, 'producer', 'soak')
const queue = createQueue('posts', {
  connection: redis,
  prefix: stack.prefix,
  logger: silentLogger(),
})
const tally = new StatusTally()
let stopClients = async () => {}
try {
  const app = await stack.createApp('soak')
  const demo = await stack.sim<{ conversation_ids: string[] }>('GET', '/_sim/demo')
  const rules = [
    ...demo.conversation_ids.map((id) => ({ value: `conversation_id:${id}` })),
    { value: 'postgres OR redis OR queue OR latency OR data' },
  ]
  const added = await stack.callApi(app.token, 'POST', '/2/tweets/search/stream/rules', {
    add: rules,
  })
  if (added.status !== 201) throw new Error(`adding rules: ${added.status}`)
  const stream = startStreamReader({ apiUrl: stack.apiUrl, token: app.token, tally })
  const poller = startSearchPoller({
    apiUrl: stack.apiUrl,
    token: app.token,
    queries: demo.conversation_ids.map((id) => `conversation_id:${id}`),
    tally,
    intervalMs: 250,
  })
  stopClients = async () => {
    await stream.stop()
    await poller.stop()
  }

  const depth = async () => {
    const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')
    return (c.waiting ?? 0) + (c.active ?? 0) + (c.delayed ?? 0) + (c.prioritized ?? 0)
  }
  const stored = async () =>
    Number((await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(stack.db)).rows[0]!.n)
  const services = () => stack.processes().filter((s) => s.running)
  const memory = () => new Map<ServiceProcess, MemorySample>(services().map((s) => [s, s.memory()]))

  // Start figures once Posts flow end to end (first stream arrivals), so startup is not counted.
  const flowingBy = Date.now() + 120_000
  while (stream.latency.length === 0) {
    if (Date.now() > flowingBy) throw new Error('no Post reached the stream client in 2 minutes')
    await pause(250)
  }
  const startAt = Date.now()
  const endAt = startAt + minutes * 60_000
  const startMemory = memory()
  const startDepth = await depth()
  const startStored = await stored()
  let maxDepth = startDepth
  console.log(`soak: Posts flowing; measuring for ${minutes} min`)
  while (Date.now() < endAt) {
    await pause(Math.min(10_000, endAt - Date.now()))
    const d = await depth()
    maxDepth = Math.max(maxDepth, d)
    const rss = services()
      .map((s) => `${s.name} ${mb(s.memory().rss)}`)
      .join(', ')
    console.log(
      `soak: ${Math.round((Date.now() - startAt) / 1000)} s: stored ${await stored()}, queue ${d}, stream ${stream.ids.size}, rss MB: ${rss}`,
    )
  }
  const endMemory = memory()
  const endDepth = await depth()
  const endStored = await stored()
  const windowOf = (from: number, to: number) =>
    stream.latency.filter((l) => l.at >= from && l.at < to).map((l) => l.ms)
  const first = windowOf(startAt, startAt + WINDOW_MS)
  const last = windowOf(endAt - WINDOW_MS, endAt + 1)
  const searchFirst = poller.visibility
    .filter((l) => l.at >= startAt && l.at < startAt + WINDOW_MS)
    .map((l) => l.ms)
  const searchLast = poller.visibility.filter((l) => l.at >= endAt - WINDOW_MS).map((l) => l.ms)
  await stopClients()

  const perService: Record<string, unknown> = {}
  console.log('\nservice     rss start → end (MB)   heap used start → end (MB)')
  for (const [s, start] of startMemory) {
    const end = endMemory.get(s) ?? {}
    perService[s.name] = {
      rss_start_mb: mb(start.rss),
      rss_end_mb: mb(end.rss),
      heap_start_mb: mb(start.heapUsed),
      heap_end_mb: mb(end.heapUsed),
    }
    console.log(
      `${s.name.padEnd(11)} ${String(mb(start.rss)).padStart(6)} → ${String(mb(end.rss)).padEnd(12)} ${String(mb(start.heapUsed)).padStart(6)} → ${mb(end.heapUsed)}`,
    )
  }
  const p50First = p(first, 0.5)
  const p50Last = p(last, 0.5)
  console.log(
    `\nstream latency p50 first ${WINDOW_MS / 1000} s: ${p50First} ms, last: ${p50Last} ms; ` +
      `search visibility p50 ${p(searchFirst, 0.5)} → ${p(searchLast, 0.5)} ms; ` +
      `queue depth ${startDepth} → ${endDepth} (max ${maxDepth}); API ${JSON.stringify(tally.byClass())}`,
  )
  console.log(
    JSON.stringify({
      bench: 'soak',
      minutes,
      rate,
      posts_stored: endStored - startStored,
      stream_posts: stream.ids.size,
      latency_p50_first_ms: p50First,
      latency_p50_last_ms: p50Last,
      latency_p99_first_ms: p(first, 0.99),
      latency_p99_last_ms: p(last, 0.99),
      search_visibility_p50_first_ms: p(searchFirst, 0.5),
      search_visibility_p50_last_ms: p(searchLast, 0.5),
      queue_depth_start: startDepth,
      queue_depth_end: endDepth,
      queue_depth_max: maxDepth,
      api_requests: tally.byClass(),
      services: perService,
      ratio_of: 'stream latency p50, last window / first window',
      ratio: p50First && p50Last !== null ? Number((p50Last / p50First).toFixed(3)) : null,
    }),
  )
} finally {
  await stopClients()
  await queue.close()
  await closeRedis(redis)
  await stack.close()
}
