import { spawn } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { dirname, join } from 'node:path'
import { createInterface } from 'node:readline'
import { Readable, Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'
import pg from 'pg'
import { from as copyFrom, to as copyTo } from 'pg-copy-streams'
import { loadConfig } from '@threadline/config'
import { addRules, createApp, createDb, migrateToLatest, sql, withDatabase } from '@threadline/db'
import { onCompletedJobs, type PostsJobResult } from '@threadline/queue'
import { closeRedis, createRedis, deleteByPrefix } from '@threadline/redis'
import { costPerUnit, cpuSnapshot, peakRssMb } from './lib/cpu.js'

/**
 * `pnpm bench pipeline [posts] [--warmup N] [--writers N] [--profile]`: the simulator (its own
 * process) → ingest → BullMQ `posts` → writer → Postgres, for a fixed number of Posts. Reports
 * Posts/s end to end and, in the same run, the rate of a plain COPY of the same rows into a table
 * identical to posts; the last line is JSON with `ratio` = pipeline rows/s / COPY rows/s (rows: the
 * Posts and the history Posts their lines carried, which the writer stores in the same time and
 * the COPY loads too).
 *
 * Steady state, as a long-running pipeline is: `--warmup` Posts (default a tenth of `posts`, at
 * least 5,000) go through the whole pipeline first, untimed, so that the roles' code is compiled
 * and their caches and connections are what they are in service; the timed Posts follow once
 * every warm-up Post is stored. The COPY's median of three rounds is warm in the same way.
 */
const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    // Writer processes (competing consumers of `posts`), as compose's --scale does.
    writers: { type: 'string', default: '1' },
    // Each process writes a V8 CPU profile into /tmp/bench-pipeline-prof on exit.
    profile: { type: 'boolean', default: false },
    // Extra V8/Node flags for the writer and ingest processes, to try a setting (space-separated).
    'node-flags': { type: 'string', default: '' },
    // Posts through the pipeline before the timed ones (JIT, caches, connections); see above.
    warmup: { type: 'string' },
  },
})
const target = Number(positionals[0] ?? 50_000)
const warmup = Number(values.warmup ?? Math.max(5_000, Math.round(target / 10)))
const writers = Number(values.writers)
const profile = values.profile ? ['--cpu-prof', '--cpu-prof-dir=/tmp/bench-pipeline-prof'] : []
const nodeFlags = values['node-flags'].split(' ').filter(Boolean)
const base = loadConfig()
const id = randomBytes(4).toString('hex')
const prefix = `bench-pipeline-${id}`
// A database of its own, fresh each run: a schema in a shared database could resolve to another
// bench's tables through search_path.
const database = 'threadline_bench_pipeline'
const url = withDatabase(base.DATABASE_URL, database)
const admin = new pg.Client({ connectionString: withDatabase(base.DATABASE_URL, 'postgres') })
await admin.connect()
await admin.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
// Collation C, as docker-compose.yml makes its cluster (the COPY below loads into the same database).
await admin.query(`CREATE DATABASE ${database} TEMPLATE template0 LC_COLLATE 'C'`)
await admin.end()
const db = createDb({ url, poolMax: 2, applicationName: 'bench-pipeline' })
const here = dirname(fileURLToPath(import.meta.url))
const token = 'bench-token'

const sim = spawn(
  process.execPath,
  [
    ...profile,
    '--import',
    'tsx',
    join(here, 'lib', 'pipeline-simulator.ts'),
    token,
    String(target),
    String(warmup),
  ],
  { stdio: ['pipe', 'pipe', 'inherit'] },
)
// The simulator's lines on stdout (see pipeline-simulator.ts), each JSON, in order.
const simLines = createInterface({ input: sim.stdout })[Symbol.asyncIterator]()
const simSays = async <T>(): Promise<T> => {
  const next = await simLines.next()
  if (next.done) throw new Error('the simulator exited')
  return JSON.parse(next.value) as T
}
const { url: simUrl, liveFrom } = await simSays<{ url: string; liveFrom: string }>()

const roles: ReturnType<typeof spawn>[] = []
// The simulator's Posts made since `from` (its history, which quotes and replies can bring in as
// included copies, is older than liveFrom; the warm-up's is older than the timed burst's start):
// the bench is done when all `target` timed ones are stored. `all` counts every row, the history
// Posts the lines carried too, for the ratio's rows.
const counts = async (from: string) => {
  const row = (
    await sql<{ live: string; all: string }>`SELECT
        count(*) FILTER (WHERE created_at >= ${from}::timestamptz)::text AS live,
        count(*)::text AS all
      FROM posts`.execute(db)
  ).rows[0]!
  return { live: Number(row.live), all: Number(row.all) }
}
let events: { close(): Promise<void> } | undefined
let eventsConn: ReturnType<typeof createRedis> | undefined

try {
  await migrateToLatest(db)
  console.log(
    `pipeline: ${target} Posts after ${warmup} of warm-up, simulator ${simUrl}, database ${database}`,
  )
  // Writer and ingest run as their own processes, as in production (each with its own event loop).
  const roleEnv = {
    ...process.env,
    DATABASE_URL: url,
    REDIS_PREFIX: prefix,
    LOG_LEVEL: 'warn',
    // Two roles on one host: each would take the default metrics port.
    METRICS_PORT: '0',
    // As docker-compose.yml runs the writer and the ingest.
    NODE_OPTIONS: '--max-semi-space-size=32',
    UPSTREAM_URL: simUrl,
    UPSTREAM_BEARER_TOKEN: token,
  }
  // Progress: the Posts each `posts` job newly stored, live or history (an upper bound of the live
  // count), from BullMQ's events stream, which the writer's jobs append to anyway. Listening from
  // before the roles start, so no completion is missed.
  eventsConn = createRedis(base.REDIS_URL, 'worker', 'bench-progress')
  let newlyStored = 0
  events = await onCompletedJobs<PostsJobResult>('posts', prefix, eventsConn, (result) => {
    newlyStored += result.inserted
  })
  const cli = fileURLToPath(new URL('../../packages/cli/src/main.ts', import.meta.url))
  roles.push(
    ...[...Array.from({ length: writers }, () => 'writer'), 'ingest'].map((role) =>
      spawn(
        process.execPath,
        [...profile, ...nodeFlags, '--import', 'tsx', cli, 'start', '--roles', role],
        {
          env: roleEnv,
          stdio: ['ignore', 'inherit', 'inherit'],
        },
      ),
    ),
  )
  // A role or the simulator that exits before the end (a bad NODE_OPTIONS, a crash) fails the run
  // instead of leaving it waiting for Posts that will never come.
  let measuring = true
  let died: string | undefined
  let onDeath: (err: Error) => void = () => {}
  // Rejects when one exits: what waits on the simulator's next line races it.
  const death = new Promise<never>((_, reject) => (onDeath = reject))
  death.catch(() => {})
  for (const [name, child] of [
    ...roles.map((c, i) => [i < writers ? 'writer' : 'ingest', c] as const),
    ['simulator', sim] as const,
  ]) {
    child.once('exit', (code, signal) => {
      if (!measuring) return
      died ??= `${name} exited (${signal ?? `code ${code}`}) before the run ended`
      onDeath(new Error(died))
    })
  }
  const alive = () => {
    if (died) throw new Error(died)
  }
  const simSaysWhileAlive = <T>() => Promise.race([simSays<T>(), death])
  const app = await createApp(db, 'bench')
  await addRules(db, app.app_id, [{ value: 'bench:everything' }], { cap: 1000 })

  // Polling must not take the CPU it measures: a count of the stored Posts visits every row's
  // heap tuple (fresh rows are not all-visible; ≈ 6 µs of Postgres a row when it ran once a
  // second), so it runs only near the end, whenever the jobs' results (every newly stored Post,
  // live or not: an upper bound of the live count) say the target may be reached.
  const warmupSent = (await simSaysWhileAlive<{ warmup: number }>()).warmup
  // Untimed: every warm-up Post stored (polling costs nothing measured here).
  while ((await counts(liveFrom)).live < warmupSent) {
    alive()
    await new Promise((r) => setTimeout(r, 100))
  }
  console.log(`  warm-up: ${warmupSent} Posts stored`)
  newlyStored = 0
  sim.stdin.write('go\n')
  const { measuredFrom } = await simSaysWhileAlive<{ measuredFrom: string }>()
  const stored = async () => (await counts(measuredFrom)).live
  // The window opens with the first timed batch stored (a count: a warm-up job's late event must
  // not open it).
  while ((await stored()) === 0) {
    alive()
    await new Promise((r) => setTimeout(r, 10))
  }
  const t0 = performance.now()
  const cpu0 = cpuSnapshot()
  const start = await counts(measuredFrom)
  let last = 0
  let lastPrint = t0
  for (;;) {
    alive()
    const now = performance.now()
    const n = newlyStored
    if (now - lastPrint >= 1_000) {
      const perS = Math.round(((n - last) * 1000) / (now - lastPrint))
      console.log(`  ${n} newly stored (live and history), ${perS}/s`)
      last = n
      lastPrint = now
    }
    // Near the end at most 10 counts a second (history copies on the stream reach the target first).
    const near = n >= target
    if (near && (await stored()) >= target) break
    // Far from the end a tenth of a second is close enough; every wake costs this process CPU the
    // pipeline shares (≈ 0.3 ms each here at 20 ms apart).
    const pollMs = !near && n >= target * 0.9 ? 20 : 100
    await new Promise((r) => setTimeout(r, pollMs))
  }
  const elapsedMs = performance.now() - t0
  const cpu1 = cpuSnapshot()
  // Postgres backends by who they serve (writer, ingest, this bench), the rest by their type.
  const backends = await sql<{ pid: number; who: string }>`SELECT pid,
      coalesce(nullif(application_name, ''), backend_type) AS who FROM pg_stat_activity`.execute(db)
  const end = await counts(measuredFrom)
  const storedRows = end.live - start.live
  const pipelineRate = (storedRows * 1000) / elapsedMs
  // The ratio compares rows with rows: in the same time the writer also stored the history Posts
  // that replies and quotes carried (each a row the COPY below loads too).
  const windowRows = end.all - start.all
  const pipelineRowRate = (windowRows * 1000) / elapsedMs
  // Where the rows' CPU went in the measured window (each writer process apart).
  const parts = [
    ...roles.slice(0, writers).map((child, i) => [`writer${i + 1}`, child.pid] as const),
    ['ingest', roles[writers]?.pid] as const,
    ['simulator', sim.pid] as const,
    ['bench', process.pid] as const,
    ...backends.rows.map((b) => [`pg:${b.who}`, b.pid] as const),
  ]
  const { cpu, faults } = costPerUnit(cpu0, cpu1, windowRows, parts)
  console.log(`CPU µs per row in the window: ${JSON.stringify(cpu)}`)
  // Memory first touched in the window: the queue's backlog growing in Redis, backends mapping
  // shared buffers they had not used (see costPerUnit for what one costs on a virtual machine).
  console.log(`Minor page faults per row in the window: ${JSON.stringify(faults)}`)
  const writerPeakRssMb = Math.max(...roles.slice(0, writers).map((w) => peakRssMb(w.pid)))
  measuring = false
  await Promise.all(
    roles.map(
      (child) =>
        new Promise((r) => {
          child.once('exit', r)
          child.kill('SIGTERM')
        }),
    ),
  )
  sim.kill('SIGTERM')

  // Baseline: the same rows, COPY'd into a table identical to posts (same columns and indexes),
  // as `bench ingest` does.
  const columns = '*'
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  const chunks: Buffer[] = []
  await pipeline(
    client.query(copyTo(`COPY (SELECT ${columns} FROM posts) TO STDOUT`)),
    new Writable({
      write(chunk: Buffer, _enc, cb) {
        chunks.push(chunk)
        cb()
      },
    }),
  )
  const rows = Number((await client.query('SELECT count(*)::int AS n FROM posts')).rows[0].n)
  // Three COPYs, each into a fresh table, and the median: one run of two seconds swings by ±20 %
  // on a shared machine (a checkpoint or autovacuum of the rows just stored).
  const copyTimes: number[] = []
  const copyCosts: Array<ReturnType<typeof costPerUnit>> = []
  for (let round = 0; round < 3; round++) {
    await client.query('DROP TABLE IF EXISTS copy_baseline')
    await client.query('CREATE TABLE copy_baseline (LIKE posts INCLUDING ALL)')
    const before = cpuSnapshot()
    const c0 = performance.now()
    await pipeline(Readable.from(chunks), client.query(copyFrom('COPY copy_baseline FROM STDIN')))
    copyTimes.push(performance.now() - c0)
    copyCosts.push(costPerUnit(before, cpuSnapshot(), rows, [['bench', process.pid]]))
  }
  await client.end()
  const copyMs = [...copyTimes].sort((a, b) => a - b)[1]!
  const { cpu: medianCopyCpu, faults: medianCopyFaults } = copyCosts[copyTimes.indexOf(copyMs)] ?? {
    cpu: {},
    faults: {},
  }
  console.log(`COPY CPU µs per row, median round: ${JSON.stringify(medianCopyCpu)}`)
  console.log(`COPY minor page faults per row, median round: ${JSON.stringify(medianCopyFaults)}`)
  const copyRate = (rows * 1000) / copyMs
  console.log(
    `COPY rounds: ${copyTimes.map((ms) => Math.round((rows * 1000) / ms)).join(', ')} rows/s`,
  )

  console.log(
    `pipeline ${Math.round(pipelineRate)} live Posts/s (${storedRows} in ${Math.round(elapsedMs)} ms), ` +
      `${Math.round(pipelineRowRate)} rows/s with the history Posts they carried (${windowRows}); ` +
      `COPY ${Math.round(copyRate)} rows/s (${rows} in ${Math.round(copyMs)} ms)`,
  )
  console.log(
    JSON.stringify({
      bench: 'pipeline',
      posts: storedRows,
      elapsed_ms: Math.round(elapsedMs),
      posts_per_s: Math.round(pipelineRate),
      rows: windowRows,
      rows_per_s: Math.round(pipelineRowRate),
      copy_rows: rows,
      copy_ms: Math.round(copyMs),
      copy_rows_per_s: Math.round(copyRate),
      ratio: Number((pipelineRowRate / copyRate).toFixed(3)),
      cpu_us_per_row: cpu.machine,
      copy_cpu_us_per_row: medianCopyCpu.machine,
      faults_per_row: faults.all,
      copy_faults_per_row: medianCopyFaults.all,
      writer_peak_rss_mb: writerPeakRssMb,
      target_ratio: 0.5,
    }),
  )
} finally {
  await events?.close()
  if (eventsConn) await closeRedis(eventsConn)
  sim.kill('SIGTERM')
  for (const child of roles) if (child.exitCode === null) child.kill('SIGKILL')
  await db.destroy()
  const cleanup = new pg.Client({ connectionString: withDatabase(base.DATABASE_URL, 'postgres') })
  await cleanup.connect()
  await cleanup.query(`DROP DATABASE IF EXISTS ${database} WITH (FORCE)`)
  await cleanup.end()
  const redis = createRedis(base.REDIS_URL, 'producer', 'bench-cleanup')
  await deleteByPrefix(redis, prefix)
  await closeRedis(redis)
}
