import { Readable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import { parseArgs } from 'node:util'
import pg from 'pg'
import copyStreams from 'pg-copy-streams'
import {
  convertToPartitioned,
  createDb,
  createPartition,
  createSchema,
  dailyRanges,
  dropSchema,
  ensureDatabase,
  listPartitions,
  migrateToLatest,
  readConversationTree,
  searchWirePosts,
  sql,
  storeBatch,
  wirePostsByIds,
  withDatabase,
  withSearchPath,
  type Db,
  type PartitionedTable,
} from '@threadline/db'
import { normalizeLines, snowflakeAt } from '@threadline/domain'
import { compileSql, parseQuery } from '@threadline/query'
import { generateConversation, resolveTestServices } from '@threadline/testing'
import { down as unpartition } from '../../packages/db/src/migrations/20261128T120200-partitions.js'
import { COLUMNS, field } from './lib/copy-baseline.js'
import { percentile } from './lib/runs.js'
import { log } from './lib/setup.js'

/**
 * pnpm bench growth [--steps 1000000,2000000,5000000,10000000] [--sample 20000] [--reads 200]
 *   [--per-day 100000]
 * How the store behaves as it grows (docs/capacity.md §2), partitioned by day and, in the same
 * run, unpartitioned. At each step the store is filled up to the step's size with history
 * generated in SQL (fast), `--per-day` Posts a day back from yesterday: a store grows by days, so
 * the recent days a 7-day search reads hold as many Posts at 10 M as at 1 M. Then measured: rows/s
 * of `--sample` Posts through the writer's statement (storeBatch, batches of 500 of ~1 KB lines)
 * against a COPY of as many other Posts into the same `posts` table, both dated in the days ahead
 * (the partitions made in advance), so that the samples of every step, which do not hold the
 * searched keyword, never stand in the recent search's window before the history it reads; and p50/p99 of four reads, `--reads` times each: a
 * lookup of 100 ids, a search page (100) of one conversation, a recent search for a keyword with a
 * 7-day window, and a conversation's first page (its tree, then 100 Posts). Its own database
 * (`threadline_bench_growth`), dropped at the end. The last line: `write_ratio` (partitioned
 * rows/s at the last step over the first) and `read_p99_growth` (the worst read's p99 at the last
 * step over the first), both for the partitioned store; `ratio` is write_ratio.
 */
const { values } = parseArgs({
  options: {
    steps: { type: 'string', default: '1000000,2000000,5000000,10000000' },
    sample: { type: 'string', default: '20000' },
    reads: { type: 'string', default: '200' },
    'per-day': { type: 'string', default: '100000' },
  },
})
const steps = values.steps.split(',').map(Number)
const sample = Number(values.sample)
const reads = Number(values.reads)
/** History Posts a day: a store grows by days, each as busy as the last (10 M = 100 days). */
const perDay = Number(values['per-day'])
const DAY = 86_400_000
const HISTORY_DAYS = Math.ceil(Math.max(...steps) / perDay)
const FILL_CHUNK = 200_000
const READS = ['lookup_100', 'conversation_search', 'recent_search', 'conversation_first_page']

interface StepFigures {
  rows: number
  store_rows_per_s: number
  copy_rows_per_s: number
  p50_ms: Record<string, number>
  p99_ms: Record<string, number>
}

const midnight = (offset: number) => new Date(Math.floor(Date.now() / DAY) * DAY + offset * DAY)
/** History ends where yesterday begins; the samples go to the days ahead (see above). */
const HISTORY_END = midnight(-1).getTime()
const EPOCH = 1288834974657
/**
 * The id of history row `g`: day ⌊g / perDay⌋ back from HISTORY_END, a distinct millisecond in
 * it (7919 is prime to a day's milliseconds), a sequence of g mod 4096. `fill` computes the same.
 */
const historyId = (g: number) =>
  (
    ((BigInt(HISTORY_END - EPOCH) -
      BigInt(Math.floor(g / perDay) + 1) * BigInt(DAY) +
      ((BigInt(g) * 7919n) % BigInt(DAY))) <<
      22n) |
    BigInt(g % 4096)
  ).toString()

/** Daily partitions over the history window, in place of the coarse one that holds it. */
async function dailyHistory(db: Db) {
  for (const table of ['posts', 'post_references', 'conversations'] as PartitionedTable[]) {
    const coarse = (await listPartitions(db, table)).find((p) => p.to === snowflakeAt(midnight(-1)))
    if (!coarse) continue
    if (
      coarse.from !== undefined &&
      BigInt(coarse.from) > BigInt(snowflakeAt(midnight(-HISTORY_DAYS - 1)))
    ) {
      throw new Error(`${HISTORY_DAYS} days of history reach past ${coarse.name}: raise --per-day`)
    }
    await sql`DROP TABLE ${sql.table(coarse.name)}`.execute(db)
    await createPartition(db, table, { ...coarse, to: snowflakeAt(midnight(-HISTORY_DAYS - 1)) })
    for (const range of dailyRanges(table, midnight(-HISTORY_DAYS - 1), midnight(-1))) {
      await createPartition(db, table, range)
    }
  }
}

/**
 * History rows from `from` to `to` (global row numbers), at `historyId`: ~700 B of raw, a few
 * search terms, conversations of the rows of an hour, a quote for one row in 20.
 */
async function fill(db: Db, from: number, to: number) {
  for (let a = from; a < to; a += FILL_CHUNK) {
    const b = Math.min(to, a + FILL_CHUNK)
    await sql`
      WITH s AS (
        SELECT g, ((${HISTORY_END - EPOCH}::bigint - (g / ${perDay}::bigint + 1) * ${DAY}::bigint
          + (g::bigint * 7919) % ${DAY}::bigint) << 22) | (g % 4096) AS id
        FROM generate_series(${a}::bigint, ${b - 1}::bigint) g),
      p AS (
        INSERT INTO posts (id, conversation_id, author_id, text, created_at, lang, like_count, raw,
          observed_at, search_terms)
        SELECT id, ((id >> 22) / 3600000 * 3600000) << 22, g % 50000, 'history ' || g,
          to_timestamp((${EPOCH}::bigint + (id >> 22)) / 1000.0), 'en', g % 11,
          jsonb_build_object('id', id::text, 'text', repeat('x', 600)), now(),
          ARRAY['w' || (g % 5000), 'common', 'lang:en']
        FROM s RETURNING id, conversation_id)
      INSERT INTO post_references (post_id, type, referenced_id)
      SELECT id, 'quoted', conversation_id FROM p WHERE id % 20 = 0 AND id <> conversation_id`.execute(
      db,
    )
  }
}

/** Store `n` fresh Posts through storeBatch; returns rows/s and a conversation id it stored. */
async function storeSample(db: Db, n: number, step: number) {
  let stored = 0
  let root = ''
  const started = performance.now()
  for (let c = 0; stored < n; c++) {
    const size = Math.min(1000, n - stored)
    const { lines, rootId } = generateConversation({
      size,
      seed: step * 1000 + c + 1,
      startMs: midnight(1).getTime() + step * 7_200_000 + c * 1_100_000,
      padding: true,
    })
    root ||= rootId
    for (let i = 0; i < lines.length; i += 500) {
      await storeBatch(
        db,
        normalizeLines(lines.slice(i, i + 500), new Date().toISOString()),
        'bench',
      )
    }
    stored += size
  }
  return { rate: n / ((performance.now() - started) / 1000), root }
}

/** COPY `n` other fresh Posts into the same `posts` table (rows prepared before the clock). */
async function copySample(url: string, n: number, step: number) {
  const { lines } = generateConversation({
    size: n,
    seed: 9_000 + step,
    startMs: midnight(2).getTime() + step * 7_200_000,
    padding: true,
  })
  const batch = normalizeLines(lines, new Date().toISOString())
  const text =
    batch.posts
      .map((p) =>
        COLUMNS.map((c) => field((p as unknown as Record<string, unknown>)[c], c)).join('\t'),
      )
      .join('\n') + '\n'
  const client = new pg.Client({ connectionString: url })
  await client.connect()
  try {
    const started = performance.now()
    const stream = client.query(copyStreams.from(`COPY posts (${COLUMNS.join(', ')}) FROM STDIN`))
    await pipeline(Readable.from([text]), stream)
    return batch.posts.length / ((performance.now() - started) / 1000)
  } finally {
    await client.end()
  }
}

async function timeReads(db: Db, total: number, root: string) {
  const times: Record<string, number[]> = Object.fromEntries(READS.map((r) => [r, []]))
  const conversation = parseQuery(`conversation_id:${root}`)
  const keyword = parseQuery('common')
  if (!conversation.ok || !keyword.ok) throw new Error('bench queries do not parse')
  const byConversation = compileSql(conversation.ast)
  const byKeyword = compileSql(keyword.ast)
  const fields = ['created_at', 'conversation_id', 'author_id']
  const timed = async (name: string, fn: () => Promise<unknown>) => {
    const t = performance.now()
    await fn()
    times[name]!.push(performance.now() - t)
  }
  for (let i = 0; i < reads; i++) {
    const ids = Array.from({ length: 100 }, (_, k) => historyId((i * 7_777 + k * 104_729) % total))
    await timed('lookup_100', async () => {
      const found = await wirePostsByIds(db, ids, fields)
      if (found.length !== ids.length) throw new Error(`lookup found ${found.length} of 100 ids`)
    })
    await timed('conversation_search', () =>
      searchWirePosts(db, byConversation, { limit: 100, prepared: true }, fields),
    )
    await timed('recent_search', () =>
      searchWirePosts(
        db,
        byKeyword,
        { limit: 100, startTime: new Date(Date.now() - 7 * DAY), endTime: new Date() },
        fields,
      ),
    )
    await timed('conversation_first_page', async () => {
      const tree = await readConversationTree(db, root)
      const first = Array.from({ length: Math.min(100, tree.size) }, (_, p) => tree.idAt(p))
      await wirePostsByIds(db, first, fields)
    })
  }
  const p = (q: number) =>
    Object.fromEntries(
      READS.map((r) => [
        r,
        Number(
          percentile(
            [...times[r]!].sort((a, b) => a - b),
            q,
          ).toFixed(2),
        ),
      ]),
    )
  return { p50: p(50), p99: p(99) }
}

async function runStore(baseUrl: string, partitioned: boolean): Promise<StepFigures[]> {
  const schema = partitioned ? 'growth_partitioned' : 'growth_plain'
  await dropSchema(baseUrl, schema)
  await createSchema(baseUrl, schema)
  const url = withSearchPath(baseUrl, schema)
  const db = createDb({ url, poolMax: 2, applicationName: `bench-growth-${schema}` })
  const figures: StepFigures[] = []
  try {
    await migrateToLatest(db)
    if (partitioned) await dailyHistory(db)
    else await unpartition(db)
    let filled = 0
    for (const [s, target] of steps.entries()) {
      const t = performance.now()
      await fill(db, filled, target)
      filled = target
      await sql`VACUUM ANALYZE posts`.execute(db)
      await sql`VACUUM ANALYZE post_references`.execute(db)
      // The fill's pages are written out now, not by the checkpointer while the samples are timed.
      await sql`CHECKPOINT`.execute(db)
      log(`${schema}: filled to ${target} in ${((performance.now() - t) / 1000).toFixed(0)} s`)
      const store = await storeSample(db, sample, s)
      const copy = await copySample(url, sample, s)
      await sql`ANALYZE posts`.execute(db)
      const { p50, p99 } = await timeReads(db, target, store.root)
      const row = {
        rows: target,
        store_rows_per_s: Math.round(store.rate),
        copy_rows_per_s: Math.round(copy),
        p50_ms: p50,
        p99_ms: p99,
      }
      figures.push(row)
      log(
        `${schema} @ ${target}: storeBatch ${row.store_rows_per_s} rows/s, COPY ${row.copy_rows_per_s} rows/s; p50/p99 ms ` +
          READS.map((r) => `${r} ${p50[r]}/${p99[r]}`).join(', '),
      )
    }
    if (!partitioned) {
      // `threadline migrate`'s online conversion of this store at its last size, for
      // docs/deployment.md's time per 100 M Posts.
      const t = performance.now()
      await convertToPartitioned(db, { batchSize: 10_000 })
      converted = Math.round(filled / ((performance.now() - t) / 1000))
      log(
        `${schema}: converted to partitions at ${converted} Posts/s (references and conversations included)`,
      )
    }
    return figures
  } finally {
    await db.destroy()
    await dropSchema(baseUrl, schema)
  }
}
let converted = 0

const services = await resolveTestServices()
const baseUrl = withDatabase(services.databaseUrl, 'threadline_bench_growth')
await ensureDatabase(baseUrl)
try {
  const started = performance.now()
  const partitioned = await runStore(baseUrl, true)
  const plain = await runStore(baseUrl, false)
  const first = partitioned[0]!
  const last = partitioned.at(-1)!
  const writeRatio = last.store_rows_per_s / first.store_rows_per_s
  const readGrowth = Math.max(...READS.map((r) => last.p99_ms[r]! / first.p99_ms[r]!))
  const lastPlain = plain.at(-1)!
  console.log(
    JSON.stringify({
      bench: 'growth',
      steps,
      sample,
      reads,
      partitioned,
      unpartitioned: plain,
      write_ratio: Number(writeRatio.toFixed(3)),
      read_p99_growth: Number(readGrowth.toFixed(3)),
      partitioned_vs_unpartitioned_write: Number(
        (last.store_rows_per_s / lastPlain.store_rows_per_s).toFixed(3),
      ),
      partitioned_vs_unpartitioned_p99: Object.fromEntries(
        READS.map((r) => [r, Number((last.p99_ms[r]! / lastPlain.p99_ms[r]!).toFixed(3))]),
      ),
      convert_posts_per_s: converted,
      seconds: Math.round((performance.now() - started) / 1000),
      ratio: Number(writeRatio.toFixed(3)),
    }),
  )
} finally {
  await services.stop()
}
