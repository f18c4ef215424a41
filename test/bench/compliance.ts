/**
 * `pnpm bench compliance [--rate 1000] [--duration 10] [--ids 100000] [--job-ids 100000]`
 *
 * Compliance from the upstream (docs/architecture.md, Compliance), in this process: the simulator,
 * the ingest (leader, `UPSTREAM_COMPLIANCE` as each part needs) and a writer, over a fresh schema.
 *
 * Part 1, the stream path: `--rate` delete events a second for `--duration` seconds on the
 * simulator's compliance streams, each for a stored Post; from the event written on the stream
 * (the ingest reads it at once, on this machine) to its transaction in the writer
 * (`compliance_log.applied_at`, the start of the transaction that erased the Post; the mean time
 * of a `compliance` job in the writer beside it): p50, p99, max, and events/s applied. Target: p99 ≤ 2 s
 * at 1,000 events/s.
 *
 * Part 1, the sweep: `--ids` stored Posts (1 % of them deleted upstream beforehand) swept through
 * the simulator's batch compliance jobs, `--job-ids` ids a job, the simulator completing each
 * job one second after its upload; the sweep's time, ids/s, the estimate for 1 M ids, and the
 * time until every withdrawal was applied. Target: 1 M ids well under an hour (`--ids 1000000`
 * measures it; the default is modest).
 *
 * Part 2, a downstream job checking 1 M ids on Threadline's own compliance API, is
 * `compliance/downstream.ts` beside this file when present (the clients' half of issue 45): it
 * exports `downstream(env): Promise<Record<string, unknown>>`, whose figures join the last line.
 *
 * Last line: JSON with the figures and `ratio` = the share of the targets met (target_ratio 1).
 */
import { existsSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { createDb, sql } from '@threadline/db'
import { snowflakeAt } from '@threadline/domain'
import { createIngest, SweepStore, type ComplianceOptions } from '@threadline/ingest'
import { silentLogger } from '@threadline/logger'
import { createQueue } from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import { createSimulator, type Simulator } from '@threadline/simulator'
import { createWriter } from '@threadline/writer'
import { benchEnv, benchWriterOptions, log, type BenchEnv } from './lib/setup.js'
import { percentile } from './lib/runs.js'

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '1000' },
    duration: { type: 'string', default: '10' },
    ids: { type: 'string', default: '100000' },
    'job-ids': { type: 'string', default: '100000' },
  },
})
const RATE = Number(values.rate)
const DURATION_S = Number(values.duration)
const SWEEP_IDS = Number(values.ids)
const JOB_IDS = Number(values['job-ids'])
const TOKEN = 'bench-token'
const P99_TARGET_MS = 2_000
const SWEEP_1M_TARGET_S = 3_600
/** Ids one insert statement makes. */
const INSERT_CHUNK = 100_000

/**
 * `count` bare Posts (id, time, text) with consecutive snowflake ids from `fromMs`, one a
 * millisecond, inserted in SQL: the sweep reads ids only, the stream path erases rows.
 */
async function storePosts(env: BenchEnv, fromMs: number, count: number): Promise<string[]> {
  const first = BigInt(snowflakeAt(new Date(fromMs)))
  for (let done = 0; done < count; done += INSERT_CHUNK) {
    const n = Math.min(INSERT_CHUNK, count - done)
    await sql`
      INSERT INTO posts (id, conversation_id, author_id, text, created_at, raw, observed_at)
      SELECT ${first}::bigint + (g::bigint << 22), ${first}::bigint + (g::bigint << 22), 12,
        'a Post to withdraw', to_timestamp((${fromMs}::bigint + g) / 1000.0), '{}'::jsonb, now()
      FROM generate_series(${done}::bigint, ${done + n - 1}::bigint) g`.execute(env.db)
  }
  return Array.from({ length: count }, (_, i) => (first + (BigInt(i) << 22n)).toString())
}

/**
 * The mean time a `compliance` job took in the writer (BullMQ's processedOn to finishedOn, over the
 * completed jobs it keeps): applied_at is its transaction's start, the Post unservable at its end.
 */
async function jobMeanMs(env: BenchEnv): Promise<number> {
  const connection = createRedis(env.redisUrl, 'producer', 'bench-jobs')
  const queue = createQueue('compliance', {
    connection,
    prefix: env.prefix,
    logger: silentLogger(),
  })
  const jobs = await queue.getJobs(['completed'], 0, 999)
  await queue.close()
  await closeRedis(connection)
  const spans = jobs.flatMap((j) =>
    j.finishedOn && j.processedOn ? [j.finishedOn - j.processedOn] : [],
  )
  return spans.length > 0 ? Math.round(spans.reduce((a, b) => a + b, 0) / spans.length) : 0
}

function startRoles(env: BenchEnv, sim: Simulator, compliance: ComplianceOptions) {
  const writer = createWriter(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 5 }),
      redis: createRedis(env.redisUrl, 'worker', 'bench-writer'),
      logger: silentLogger(),
    },
    { ...benchWriterOptions, concurrency: 2, prefix: env.prefix },
  )
  const ingest = createIngest(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 4 }),
      databaseUrl: env.databaseUrl,
      redis: createRedis(env.redisUrl, 'producer', 'bench-ingest'),
      workerRedis: createRedis(env.redisUrl, 'worker', 'bench-ingest-watch'),
      prefix: env.prefix,
      logger: silentLogger(),
    },
    {
      upstreamUrl: sim.url,
      upstreamBearerToken: TOKEN,
      search: 'recent',
      batchMaxItems: 500,
      reconcileMs: 60_000,
      rulesDebounceMs: 200,
      stallMs: 30_000,
      backfillMinutes: 5,
      noRulesRetryMs: 60_000,
      backoff: {
        networkStepMs: 250,
        networkMaxMs: 16_000,
        httpMs: 5_000,
        httpMaxMs: 320_000,
        rateLimitMs: 60_000,
        rateLimitMaxMs: 960_000,
      },
      leaseMs: 15_000,
      backfillConcurrency: 1,
      backfillMaxWaitMs: 60_000,
      shutdownTimeoutMs: 5_000,
      backfillWorker: false,
      compliance,
    },
  )
  return { writer, ingest }
}

async function until(what: string, check: () => Promise<boolean> | boolean, timeoutMs: number) {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 100))
  }
}

const appliedCount = async (env: BenchEnv, source: string) => {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*)::text AS n FROM compliance_log WHERE source = ${source}`.execute(env.db)
  return Number(rows[0]!.n)
}

const COMPLIANCE: ComplianceOptions = {
  mode: 'stream',
  intervalMs: 12 * 3_600_000,
  jobMaxIds: JOB_IDS,
  pollMs: 1_000,
  pollMaxMs: 30_000,
  jobTimeoutMs: 2 * 3_600_000,
}

async function streamPath(env: BenchEnv, sim: Simulator) {
  const total = RATE * DURATION_S
  const ids = await storePosts(env, Date.now() - 3_600_000, total)
  const { writer, ingest } = startRoles(env, sim, COMPLIANCE)
  await writer.start()
  await ingest.start()
  try {
    await until('eight compliance connections', () => sim.compliance.stats().streams === 8, 30_000)
    log(`stream path: ${total} deletes at ${RATE}/s`)
    const emitted = new Map<string, number>()
    const started = Date.now()
    let next = 0
    // Every 10 ms, the events due by then: a steady rate, not one burst a second.
    await new Promise<void>((resolve) => {
      const timer = setInterval(() => {
        const due = Math.min(total, Math.floor(((Date.now() - started) * RATE) / 1000))
        for (; next < due; next++) {
          const id = ids[next]!
          emitted.set(id, Date.now())
          sim.compliance.withdrawals.apply({ kind: 'tweet', id, authorId: '12', action: 'delete' })
        }
        if (next >= total) {
          clearInterval(timer)
          resolve()
        }
      }, 10)
    })
    await until(
      'every delete applied',
      async () => (await appliedCount(env, 'stream')) >= total,
      120_000,
    )
    const { rows } = await sql<{ id: string; at: Date }>`
      SELECT target_id::text AS id, applied_at AS at FROM compliance_log
      WHERE source = 'stream'`.execute(env.db)
    const latencies = rows.map((r) => r.at.getTime() - emitted.get(r.id)!).sort((a, b) => a - b)
    const last = Math.max(...rows.map((r) => r.at.getTime()))
    const figures = {
      stream_events: total,
      stream_events_per_s: Math.round((total * 1000) / (last - started)),
      stream_p50_ms: percentile(latencies, 50),
      stream_p99_ms: percentile(latencies, 99),
      stream_max_ms: latencies[latencies.length - 1],
      // applied_at is the transaction's start: the Post is unservable once its job ends.
      stream_job_mean_ms: await jobMeanMs(env),
    }
    log(`stream path: ${JSON.stringify(figures)}`)
    return figures
  } finally {
    await ingest.close()
    await writer.close()
  }
}

async function sweep(env: BenchEnv, sim: Simulator) {
  log(`sweep: storing ${SWEEP_IDS} Posts`)
  const ids = await storePosts(env, Date.now() - 2 * 86_400_000, SWEEP_IDS)
  const withdrawn = ids.filter((_, i) => i % 100 === 7)
  for (const id of withdrawn) sim.compliance.withdrawals.deletePost(id)
  const before = await appliedCount(env, 'job')
  const { writer, ingest } = startRoles(env, sim, { ...COMPLIANCE, mode: 'jobs' })
  const redis = createRedis(env.redisUrl, 'producer', 'bench-sweep-state')
  const store = new SweepStore(redis, env.prefix)
  const started = Date.now()
  await writer.start()
  await ingest.start()
  try {
    await until(
      'the sweep complete',
      async () => (await store.read()).lastCompleteAt !== undefined,
      3 * 3_600_000,
    )
    const state = await store.read()
    const sweepMs = state.lastCompleteAt! - started
    await until(
      'every withdrawal applied',
      async () => (await appliedCount(env, 'job')) - before >= withdrawn.length,
      600_000,
    )
    const appliedMs = Date.now() - started
    const figures = {
      sweep_ids: SWEEP_IDS,
      sweep_jobs: sim.compliance.stats().jobsCreated,
      sweep_s: Math.round(sweepMs / 100) / 10,
      sweep_ids_per_s: Math.round((SWEEP_IDS * 1000) / sweepMs),
      sweep_1m_estimate_s: Math.round((1_000_000 * sweepMs) / SWEEP_IDS / 1000),
      sweep_applied_s: Math.round(appliedMs / 100) / 10,
      sweep_withdrawn: withdrawn.length,
    }
    log(`sweep: ${JSON.stringify(figures)}`)
    return figures
  } finally {
    await ingest.close()
    await writer.close()
    await closeRedis(redis)
  }
}

async function downstream(env: BenchEnv): Promise<Record<string, unknown>> {
  const file = new URL('./compliance/downstream.ts', import.meta.url)
  if (!existsSync(file))
    return { downstream: 'not measured here (compliance/downstream.ts absent)' }
  const part = (await import(file.href)) as {
    downstream(env: BenchEnv): Promise<Record<string, unknown>>
  }
  return part.downstream(env)
}

const env = await benchEnv('compliance')
const sim = createSimulator({
  port: 0,
  rate: 0,
  bearerToken: TOKEN,
  complianceJobMs: 1_000,
  world: { users: 50, historyPosts: 100, demoConversations: 0 },
})
await sim.start()
try {
  const stream = await streamPath(env, sim)
  const swept = await sweep(env, sim)
  const part2 = await downstream(env)
  const met = [
    stream.stream_p99_ms <= P99_TARGET_MS,
    swept.sweep_1m_estimate_s <= SWEEP_1M_TARGET_S,
  ]
  console.log(
    JSON.stringify({
      ...stream,
      ...swept,
      ...part2,
      targets: { stream_p99_ms: P99_TARGET_MS, sweep_1m_s: SWEEP_1M_TARGET_S },
      target_ratio: 1,
      ratio: met.filter(Boolean).length / met.length,
    }),
  )
} finally {
  await sim.close()
  await env.close()
}
