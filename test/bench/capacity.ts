import { parseArgs } from 'node:util'
import { sql, storeBatch } from '@threadline/db'
import { normalizeLines } from '@threadline/domain'
import { silentLogger } from '@threadline/logger'
import { addPostsBatch, createQueue, type PostsJob } from '@threadline/queue'
import { closeRedis, createRedis, publishStored, storedStreamKey } from '@threadline/redis'
import { generateConversation } from '@threadline/testing'
import { benchEnv, log } from './lib/setup.js'

/**
 * pnpm bench capacity [--posts 200000] [--batch 500] [--queued 20000]
 * Measures what docs/capacity.md extrapolates from: the bytes per Post of the `posts` heap and of
 * each index (and of the tables a Post touches), after storing N Posts (~1 KB lines, conversations
 * of 1000) through storeBatch as the writer does; and the Redis bytes of a queued Post (a `posts`
 * job's hash, per line) and of a `stored` stream entry (MEMORY USAGE … SAMPLES 0), and the WAL
 * bytes per stored Post. `ratio` is the
 * bytes of all `posts` indexes over the bytes of its heap (with TOAST), both measured here.
 */
const { values } = parseArgs({
  options: {
    posts: { type: 'string', default: '200000' },
    batch: { type: 'string', default: '500' },
    queued: { type: 'string', default: '20000' },
  },
})
const total = Number(values.posts)
const batchSize = Number(values.batch)
const queued = Number(values.queued)
const GB = 1024 ** 3
const PER = 100_000_000

const env = await benchEnv('capacity')
const redis = createRedis(env.redisUrl, 'producer', 'bench-capacity')
try {
  log(`storing ${total} Posts through storeBatch in batches of ${batchSize}…`)
  let lineBytes = 0
  let stored = 0
  // WAL written while storing (the shared server's other traffic adds noise; run it quiet).
  const walAt = async () =>
    (await sql<{ lsn: string }>`SELECT pg_current_wal_lsn()::text AS lsn`.execute(env.db)).rows[0]!
      .lsn
  const walStart = await walAt()
  const started = performance.now()
  let sampleLines: string[] = []
  for (let c = 0; stored < total; c++) {
    const size = Math.min(1000, total - stored)
    const { lines } = generateConversation({
      size,
      seed: c + 1,
      startMs: Date.UTC(2026, 0, 1) + c * 3_600_000,
      padding: true,
    })
    if (sampleLines.length < queued) sampleLines = sampleLines.concat(lines)
    for (let i = 0; i < lines.length; i += batchSize) {
      const batch = lines.slice(i, i + batchSize)
      for (const l of batch) lineBytes += Buffer.byteLength(l)
      await storeBatch(env.db, normalizeLines(batch, new Date().toISOString()), 'bench')
    }
    stored += size
    if (c % 20 === 19) log(`  ${stored} stored`)
  }
  const storeSeconds = (performance.now() - started) / 1000
  const walBytes = Number(
    (
      await sql<{
        n: string
      }>`SELECT pg_wal_lsn_diff(${await walAt()}::pg_lsn, ${walStart}::pg_lsn)::text AS n`.execute(
        env.db,
      )
    ).rows[0]!.n,
  )
  log(`WAL: ${Math.round(walBytes / total)} bytes per Post`)
  const avgLine = lineBytes / total
  log(`stored in ${storeSeconds.toFixed(1)} s; average line ${Math.round(avgLine)} bytes`)

  await sql`VACUUM ANALYZE posts`.execute(env.db)
  await sql`VACUUM ANALYZE post_references`.execute(env.db)
  await sql`VACUUM ANALYZE conversations`.execute(env.db)
  await sql`VACUUM ANALYZE users`.execute(env.db)
  const counts = (
    await sql<{
      posts: string
      refs: string
      convs: string
      users: string
    }>`SELECT (SELECT count(*) FROM posts) AS posts, (SELECT count(*) FROM post_references) AS refs,
              (SELECT count(*) FROM conversations) AS convs, (SELECT count(*) FROM users) AS users`.execute(
      env.db,
    )
  ).rows[0]!
  const posts = Number(counts.posts)
  const relations = (
    await sql<{ table: string; name: string; kind: string; bytes: string }>`
      SELECT c.relname AS "table", c.relname AS name, 'heap' AS kind,
             pg_table_size(c.oid)::text AS bytes
        FROM pg_class c
       WHERE c.relnamespace = current_schema()::regnamespace
         AND c.relname IN ('posts', 'post_references', 'conversations', 'users')
      UNION ALL
      SELECT t.relname, i.relname, 'index', pg_relation_size(i.oid)::text
        FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class t ON t.oid = x.indrelid
       WHERE t.relnamespace = current_schema()::regnamespace
         AND t.relname IN ('posts', 'post_references', 'conversations', 'users')
       ORDER BY 1, 3, 2`.execute(env.db)
  ).rows
  const perPost: Record<string, number> = {}
  for (const r of relations) {
    perPost[r.kind === 'heap' ? `${r.table} (heap+toast)` : r.name] = Number(r.bytes) / posts
  }
  const postsHeap = perPost['posts (heap+toast)']!
  const postsIndexes = relations
    .filter((r) => r.table === 'posts' && r.kind === 'index')
    .reduce((a, r) => a + Number(r.bytes), 0)
  const allBytes = relations.reduce((a, r) => a + Number(r.bytes), 0)
  for (const [name, bytes] of Object.entries(perPost)) {
    log(
      `  ${name.padEnd(36)} ${bytes.toFixed(1).padStart(8)} B/Post  ${((bytes * PER) / GB).toFixed(1).padStart(7)} GiB per 100M`,
    )
  }

  log(`queueing ${queued} lines as posts jobs (no worker) to measure Redis bytes per queued Post…`)
  const queue = createQueue<PostsJob>('posts', {
    connection: redis,
    prefix: env.prefix,
    logger: silentLogger(),
  })
  const lines = sampleLines.slice(0, queued)
  // As the ingest queues them: a batch's lines beside its job (posts-payload.ts).
  let jobBytes = 0
  for (let i = 0; i < lines.length; i += batchSize) {
    const job = await addPostsBatch(queue, redis, env.prefix, {
      source: 'stream',
      observed_at: new Date().toISOString(),
      lines: lines.slice(i, i + batchSize),
    })
    jobBytes += Number(await redis.call('MEMORY', 'USAGE', queue.toKey(job.id!), 'SAMPLES', '0'))
    jobBytes += Number(await redis.call('MEMORY', 'USAGE', job.data.payload, 'SAMPLES', '0'))
    await redis.del(job.data.payload)
  }
  const waitBytes = Number(await redis.call('MEMORY', 'USAGE', queue.toKey('wait'), 'SAMPLES', '0'))
  const queuedLineBytes = lines.reduce((a, l) => a + Buffer.byteLength(l), 0)
  const perQueued = (jobBytes + waitBytes) / lines.length
  log(
    `  ${perQueued.toFixed(0)} B per queued Post (line ${Math.round(queuedLineBytes / lines.length)} B)`,
  )
  await queue.obliterate({ force: true })
  await queue.close()

  log('publishing stored-stream entries for a sample of stored Posts…')
  const sample = (
    await sql<{ id: string; post: string; author: string | null }>`
      SELECT p.id, p.raw::text AS post, u.raw::text AS author
        FROM posts p LEFT JOIN users u ON u.id = p.author_id
       ORDER BY p.id LIMIT ${Math.min(queued, posts)}`.execute(env.db)
  ).rows
  await publishStored(
    redis,
    env.prefix,
    sample.map((r) => ({
      type: 'post' as const,
      id: r.id,
      body: `{"data":${r.post},"author":${r.author ?? 'null'}}`,
    })),
    3_600_000,
  )
  const streamKey = storedStreamKey(env.prefix)
  const streamBytes = Number(await redis.call('MEMORY', 'USAGE', streamKey, 'SAMPLES', '0'))
  const perEntry = streamBytes / sample.length
  log(`  ${perEntry.toFixed(0)} B per stored-stream entry`)
  await redis.del(streamKey)

  const round = (n: number) => Math.round(n * 10) / 10
  console.log(
    JSON.stringify({
      bench: 'capacity',
      posts,
      post_references: Number(counts.refs),
      conversations: Number(counts.convs),
      users: Number(counts.users),
      avg_line_bytes: Math.round(avgLine),
      store_posts_per_s: Math.round(total / storeSeconds),
      wal_bytes_per_post: Math.round(walBytes / total),
      bytes_per_post: Object.fromEntries(Object.entries(perPost).map(([k, v]) => [k, round(v)])),
      gib_per_100m: {
        posts_heap: round((postsHeap * PER) / GB),
        posts_indexes: round((postsIndexes / posts) * (PER / GB)),
        all_tables_and_indexes: round((allBytes / posts) * (PER / GB)),
      },
      redis_bytes_per_queued_post: Math.round(perQueued),
      redis_bytes_per_stored_entry: Math.round(perEntry),
      ratio: round(postsIndexes / posts / postsHeap),
    }),
  )
} finally {
  await closeRedis(redis)
  await env.close()
}
