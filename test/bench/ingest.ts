import { spawn } from 'node:child_process'
import { parseArgs } from 'node:util'
import { sql } from '@threadline/db'
import { addPostsBatch, createQueue, type PostsJob } from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import { generateConversation } from '@threadline/testing'
import { copyBaseline } from './lib/copy-baseline.js'
import { peakRssMb } from './lib/cpu.js'
import { benchEnv, log } from './lib/setup.js'

/**
 * pnpm bench ingest [--posts 200000] [--batch 500] [--concurrency 4] [--writers 1]
 * N Posts (~1 KB each, conversations of 1000 with deep reply branches) through the `posts` queue into
 * a writer process and Postgres, against a plain COPY of the same Posts into an identical table.
 */
const { values } = parseArgs({
  options: {
    posts: { type: 'string', default: '200000' },
    batch: { type: 'string', default: '500' },
    concurrency: { type: 'string', default: '4' },
    writers: { type: 'string', default: '1' },
  },
})
const total = Number(values.posts)
const batchSize = Number(values.batch)

const env = await benchEnv('ingest')
try {
  log(`generating ${total} Posts…`)
  const lines: string[] = []
  for (let c = 0; lines.length < total; c++) {
    const size = Math.min(1000, total - lines.length)
    lines.push(
      ...generateConversation({
        size,
        seed: c + 1,
        startMs: Date.UTC(2026, 0, 1) + c * 3_600_000,
        padding: true,
      }).lines,
    )
  }
  const avgBytes = Math.round(lines.reduce((a, l) => a + l.length, 0) / lines.length)
  log(`average line ${avgBytes} bytes`)

  log('baseline: COPY into an identical bare table…')
  const copy = await copyBaseline(env.databaseUrl, lines)
  log(`COPY: ${Math.round(copy.rate)} rows/s`)

  const redis = createRedis(env.redisUrl, 'producer')
  const queue = createQueue<PostsJob>('posts', {
    connection: redis,
    prefix: env.prefix,
    logger: (await import('@threadline/logger')).silentLogger(),
  })
  const spawnWriter = () =>
    spawn(
      process.execPath,
      [
        ...(process.env.BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir=/tmp/wprof'] : []),
        '--import',
        'tsx',
        'services/writer/src/main.ts',
      ],
      {
        env: {
          ...process.env,
          DATABASE_URL: env.databaseUrl,
          REDIS_URL: env.redisUrl,
          REDIS_PREFIX: env.prefix,
          WRITER_CONCURRENCY: values.concurrency,
          LOG_LEVEL: 'warn',
        },
        stdio: ['ignore', 'inherit', 'inherit'],
      },
    )
  const writers = Array.from({ length: Number(values.writers) }, spawnWriter)
  // Wait for the writer to be consuming before the clock starts.
  while ((await queue.getWorkersCount()) < writers.length)
    await new Promise((r) => setTimeout(r, 50))

  log(
    `pipeline: ${total} Posts in batches of ${batchSize} → queue → ${writers.length} writer process(es) (concurrency ${values.concurrency} each) → Postgres…`,
  )
  const started = performance.now()
  // As the ingest queues them: each batch's lines in a payload beside its job (posts-payload.ts).
  let batches = 0
  for (let i = 0; i < lines.length; i += batchSize, batches++) {
    await addPostsBatch(queue, redis, env.prefix, {
      source: 'bench',
      observed_at: new Date().toISOString(),
      lines: lines.slice(i, i + batchSize),
    })
  }
  // Progress from Redis (completed jobs), not count(*) on Postgres: the poll must not compete
  // with the writer for the same cores.
  let remaining = batches
  let lastLog = 0
  while (remaining > 0) {
    await new Promise((r) => setTimeout(r, 50))
    const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized')
    remaining = Object.values(counts).reduce((a, b) => a + b, 0)
    if (performance.now() - lastLog > 2000) {
      lastLog = performance.now()
      log(`  ${batches - remaining}/${batches} batches stored`)
    }
  }
  const seconds = (performance.now() - started) / 1000
  const rate = total / seconds
  const stored = Number(
    (await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(env.db)).rows[0]!.n,
  )
  if (stored !== total) throw new Error(`stored ${stored} Posts, expected ${total}`)
  const writerPeakRssMb = Math.max(...writers.map((w) => peakRssMb(w.pid)))
  await Promise.all(
    writers.map(
      (w) =>
        new Promise((r) => {
          w.once('exit', r)
          w.kill('SIGTERM')
        }),
    ),
  )
  await queue.obliterate({ force: true })
  await queue.close()
  await closeRedis(redis)

  log(
    `pipeline: ${Math.round(rate)} Posts/s end to end; COPY ${Math.round(copy.rate)} rows/s; writer peak RSS ${writerPeakRssMb} MB`,
  )
  console.log(
    JSON.stringify({
      bench: 'ingest',
      posts: total,
      batch: batchSize,
      concurrency: Number(values.concurrency),
      writers: writers.length,
      avg_line_bytes: avgBytes,
      posts_per_s: Math.round(rate),
      copy_rows_per_s: Math.round(copy.rate),
      writer_peak_rss_mb: writerPeakRssMb,
      ratio: Number((rate / copy.rate).toFixed(3)),
    }),
  )
} finally {
  await env.close()
}
