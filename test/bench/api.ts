/**
 * `pnpm bench api [--posts N] [--duration S] [--connections C]`: the read API against a bare
 * node:http + pg server answering the same queries with hand-written JSON, on a store of ≥ 1M
 * Posts (a dedicated database, generated with set-based SQL and reused between runs). Each server
 * runs in its own child process so that autocannon does not share their event loop. Each scenario
 * runs in alternating 2 s rounds of the two servers; its ratio is the median over the rounds of
 * api req/s ÷ baseline req/s. The last line is JSON with `ratio`: the minimum over the scenarios.
 */
import http from 'node:http'
import { parseArgs } from 'node:util'
import { fileURLToPath } from 'node:url'
import pg from 'pg'
import { loadConfig } from '@threadline/config'
import {
  createApp,
  createDb,
  ensureDatabase,
  migrateToLatest,
  sql,
  withDatabase,
} from '@threadline/db'
import {
  combine,
  serveApi,
  serveBare,
  load,
  startServerChild,
  stopChild,
  type LoadFigures,
} from './lib/http-load.js'
import { median } from './lib/runs.js'

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    posts: { type: 'string', default: '1000000' },
    duration: { type: 'string', default: '12' },
    connections: { type: 'string', default: '10' },
    only: { type: 'string' },
    profile: { type: 'boolean', default: false },
  },
})
const TARGET_POSTS = Number(values.posts)
const ONLY = values.only?.split(',')
const DURATION = Number(values.duration)
const CONNECTIONS = Number(values.connections)
const CONVERSATIONS = 10_000
const FIELDS = 'created_at,author_id,conversation_id,public_metrics'
const TWEPOCH = 1288834974657n

const config = loadConfig()
const benchUrl = withDatabase(config.DATABASE_URL, 'threadline_bench')

// ---------------------------------------------------------------- child processes: the servers

type Row = {
  id: string
  text: string
  created_at: Date
  conversation_id: string | null
  author_id: string | null
  raw: { public_metrics?: unknown }
}

/** The same Post shape as the API's for FIELDS, written by hand. */
function postJson(r: Row): string {
  let s = `{"id":"${r.id}","text":${JSON.stringify(r.text)},"created_at":"${r.created_at.toISOString()}"`
  if (r.author_id) s += `,"author_id":"${r.author_id}"`
  if (r.conversation_id) s += `,"conversation_id":"${r.conversation_id}"`
  if (r.raw.public_metrics) s += `,"public_metrics":${JSON.stringify(r.raw.public_metrics)}`
  return s + '}'
}

async function serveBaseline(): Promise<void> {
  const pool = new pg.Pool({ connectionString: benchUrl, max: 10 })
  const cols = 'id, text, created_at, conversation_id, author_id, in_reply_to_user_id, raw'
  const server = http.createServer((req, res) => {
    const url = new URL(req.url!, 'http://x')
    const send = (body: string) => {
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8' })
      res.end(body)
    }
    const fail = (err: Error) => {
      res.writeHead(500)
      res.end(String(err.message))
    }
    if (url.pathname === '/2/tweets') {
      const ids = url.searchParams.get('ids')!.split(',')
      pool
        .query<Row>(`SELECT ${cols} FROM posts WHERE id = any($1::bigint[])`, [ids])
        .then(({ rows }) => {
          const byId = new Map(rows.map((r) => [r.id, r]))
          const data = ids.flatMap((id) => (byId.has(id) ? [postJson(byId.get(id)!)] : []))
          send(`{"data":[${data.join(',')}]}`)
        }, fail)
    } else if (url.pathname === '/2/tweets/search/all') {
      const conv = url.searchParams.get('query')!.split(':')[1]!
      pool
        .query<Row>(
          `SELECT ${cols} FROM posts WHERE conversation_id = $1 ORDER BY id DESC LIMIT 101`,
          [conv],
        )
        .then(({ rows }) => {
          const page = rows.slice(0, 100)
          const meta = `{"newest_id":"${page[0]!.id}","oldest_id":"${page.at(-1)!.id}","result_count":${page.length}}`
          send(`{"data":[${page.map(postJson).join(',')}],"meta":${meta}}`)
        }, fail)
    } else if (url.pathname === '/2/tweets/counts/all') {
      const conv = url.searchParams.get('query')!.split(':')[1]!
      const start = url.searchParams.get('start_time')!
      const end = url.searchParams.get('end_time')!
      pool
        .query<{ start: Date; end: Date; n: string }>(
          `WITH c AS (
             SELECT date_trunc('hour', created_at, 'UTC') AS b, count(*) AS n FROM posts
             WHERE conversation_id = $1 AND created_at >= $2 AND created_at < $3 GROUP BY 1)
           SELECT greatest(g, $2::timestamptz) AS start, least(g + interval '1 hour', $3::timestamptz) AS end,
             coalesce(c.n, 0) AS n
           FROM generate_series(date_trunc('hour', $2::timestamptz, 'UTC'),
             $3::timestamptz - interval '1 microsecond', interval '1 hour') g
           LEFT JOIN c ON c.b = g ORDER BY g`,
          [conv, start, end],
        )
        .then(({ rows }) => {
          let total = 0
          const data = rows.map((r) => {
            total += Number(r.n)
            return `{"end":"${r.end.toISOString()}","start":"${r.start.toISOString()}","tweet_count":${Number(r.n)}}`
          })
          send(`{"data":[${data.join(',')}],"meta":{"total_tweet_count":${total}}}`)
        }, fail)
    } else if (archivePage(url, pool, send, fail)) {
      // A timeline or quote page (archivePage answered it).
    } else {
      res.writeHead(404)
      res.end('{}')
    }
  })
  serveBare(server, pool)
}

/**
 * The bare baseline's timeline and quote pages: one keyset query each, X's meta written by hand
 * (as the API orders it). False when the path is neither.
 */
function archivePage(
  url: URL,
  pool: pg.Pool,
  send: (body: string) => void,
  fail: (err: Error) => void,
): boolean {
  const cols =
    'p.id, p.text, p.created_at, p.conversation_id, p.author_id, p.in_reply_to_user_id, p.raw'
  const timeline = /^\/2\/users\/(\d+)\/tweets$/.exec(url.pathname)
  const quotes = /^\/2\/tweets\/(\d+)\/quote_tweets$/.exec(url.pathname)
  if (!timeline && !quotes) return false
  const query = timeline
    ? `SELECT ${cols} FROM posts p WHERE p.author_id = $1 ORDER BY p.id DESC LIMIT 101`
    : `SELECT ${cols} FROM post_references r JOIN posts p ON p.id = r.post_id
       WHERE r.referenced_id = $1 AND r.type = 'quoted' ORDER BY r.post_id DESC LIMIT 101`
  pool.query<Row>(query, [(timeline ?? quotes)![1]]).then(({ rows }) => {
    const page = rows.slice(0, 100)
    const meta = timeline
      ? `{"result_count":${page.length},"newest_id":"${page[0]!.id}","oldest_id":"${page.at(-1)!.id}"}`
      : `{"result_count":${page.length}}`
    send(`{"data":[${page.map(postJson).join(',')}],"meta":${meta}}`)
  }, fail)
  return true
}

/**
 * Quotes for the quote page (data made before it had them): 300 k Posts each quote one of 1,000
 * conversation roots, ~300 quotes each. The Posts' raw is left as is: the page asks for no
 * field that shows the reference.
 */
async function ensureQuotes(db: ReturnType<typeof createDb>): Promise<void> {
  const { rows } = await sql`SELECT 1 FROM post_references WHERE type = 'quoted' LIMIT 1`.execute(
    db,
  )
  if (rows.length > 0) return
  await sql`
    WITH roots AS (
      SELECT id, row_number() OVER (ORDER BY id) - 1 AS k FROM posts
      WHERE id = conversation_id ORDER BY id LIMIT 1000)
    INSERT INTO post_references (post_id, type, referenced_id)
    SELECT p.id, 'quoted', r.id FROM posts p JOIN roots r ON r.k = p.id % 1000
    WHERE p.author_id < 1300 AND p.id <> r.id
    ON CONFLICT DO NOTHING`.execute(db)
  await sql`ANALYZE post_references`.execute(db)
}

// ---------------------------------------------------------------- parent: data, load, figures

async function ensureData(): Promise<{ posts: number; start: Date }> {
  await ensureDatabase(benchUrl)
  const db = createDb({ url: benchUrl, poolMax: 2, applicationName: 'bench-setup' })
  try {
    await migrateToLatest(db)
    const count = async () =>
      Number((await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(db)).rows[0]!.n)
    let posts = await count()
    if (posts < TARGET_POSTS) {
      console.log(`generating ${TARGET_POSTS} Posts in ${CONVERSATIONS} conversations…`)
      const t0 = performance.now()
      await sql`TRUNCATE posts`.execute(db)
      // Posts every 400 ms ending now; post g belongs to conversation (g-1) % CONVERSATIONS,
      // whose root is the conversation's first Post. Ids are snowflakes of created_at.
      await sql`
        INSERT INTO posts (id, conversation_id, author_id, in_reply_to_user_id, in_reply_to_post_id,
          text, created_at, lang, retweet_count, reply_count, like_count, quote_count, raw, observed_at)
        SELECT s.id, s.conv, s.author, s.reply_user, s.reply_post, s.text, t.created_at, 'en',
          g % 5, g % 7, g % 13, 0,
          jsonb_build_object(
            'id', s.id::text, 'text', s.text, 'author_id', s.author::text,
            'conversation_id', s.conv::text, 'created_at', to_char(t.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
            'lang', 'en', 'edit_history_tweet_ids', jsonb_build_array(s.id::text),
            'public_metrics', jsonb_build_object('retweet_count', g % 5, 'reply_count', g % 7,
              'like_count', g % 13, 'quote_count', 0, 'bookmark_count', 0, 'impression_count', g % 1000),
            'entities', jsonb_build_object('hashtags', jsonb_build_array(
              jsonb_build_object('start', 0, 'end', 6, 'tag', 'topic' || (g % 50)))),
            'reply_settings', 'everyone', 'possibly_sensitive', false)
            || CASE WHEN s.reply_post IS NULL THEN '{}'::jsonb ELSE jsonb_build_object(
              'in_reply_to_user_id', s.reply_user::text,
              'referenced_tweets', jsonb_build_array(jsonb_build_object('type', 'replied_to', 'id', s.reply_post::text))) END,
          now()
        FROM generate_series(1, ${TARGET_POSTS}::int) AS g
        CROSS JOIN LATERAL (
          SELECT now() - (${TARGET_POSTS}::int - g) * interval '400 ms' AS created_at,
                 now() - (${TARGET_POSTS}::int - ((g - 1) % ${CONVERSATIONS}::int + 1)) * interval '400 ms' AS root_at
        ) t
        CROSS JOIN LATERAL (
          SELECT
            ((((extract(epoch FROM t.created_at) * 1000)::bigint - ${TWEPOCH.toString()}::bigint) << 22) | (g % 4096)) AS id,
            ((((extract(epoch FROM t.root_at) * 1000)::bigint - ${TWEPOCH.toString()}::bigint) << 22) | (((g - 1) % ${CONVERSATIONS}::int + 1) % 4096)) AS conv,
            1000 + g % 1000 AS author,
            CASE WHEN g > ${CONVERSATIONS}::int THEN 1000 + (g - 1) % 1000 END AS reply_user,
            CASE WHEN g > ${CONVERSATIONS}::int THEN
              ((((extract(epoch FROM t.root_at) * 1000)::bigint - ${TWEPOCH.toString()}::bigint) << 22) | (((g - 1) % ${CONVERSATIONS}::int + 1) % 4096))
            END AS reply_post,
            'post ' || g || ' #topic' || (g % 50) || ' in a benchmark conversation' AS text
        ) s
      `.execute(db)
      await sql`ANALYZE posts`.execute(db)
      posts = await count()
      console.log(`generated ${posts} Posts in ${Math.round((performance.now() - t0) / 1000)} s`)
    } else {
      console.log(`reusing ${posts} stored Posts in threadline_bench`)
    }
    await ensureQuotes(db)
    const first = await sql<{ t: Date }>`SELECT min(created_at) AS t FROM posts`.execute(db)
    return { posts, start: first.rows[0]!.t }
  } finally {
    await db.destroy()
  }
}

async function sampleIds(): Promise<{ ids: string[]; conversations: string[]; quoted: string[] }> {
  const pool = new pg.Pool({ connectionString: benchUrl, max: 1 })
  try {
    const ids = await pool.query<{ id: string }>(
      'SELECT id FROM posts TABLESAMPLE SYSTEM (1) LIMIT 5000',
    )
    const convs = await pool.query<{ c: string }>(
      'SELECT DISTINCT conversation_id AS c FROM posts TABLESAMPLE SYSTEM (1) LIMIT 200',
    )
    const quoted = await pool.query<{ id: string }>(
      "SELECT DISTINCT referenced_id AS id FROM post_references WHERE type = 'quoted' LIMIT 200",
    )
    return {
      ids: ids.rows.map((r) => r.id),
      conversations: convs.rows.map((r) => r.c),
      quoted: quoted.rows.map((r) => r.id),
    }
  } finally {
    await pool.end()
  }
}

const startChild = (mode: string) =>
  startServerChild(
    fileURLToPath(import.meta.url),
    mode,
    values.profile ? ['--cpu-prof', '--cpu-prof-dir=/tmp/bench-api-prof'] : [],
  )

async function main(): Promise<void> {
  const { posts, start } = await ensureData()
  const { ids, conversations, quoted } = await sampleIds()
  let i = 0
  const pick = <T>(list: T[]) => list[i++ % list.length]!
  const windowStart = new Date(start.getTime() - (start.getTime() % 3_600_000)).toISOString()
  const windowEnd = new Date(
    Math.min(Date.now() - 60_000, start.getTime() + 6 * 86_400_000),
  ).toISOString()
  const scenarios: Record<string, () => string> = {
    lookup_1: () => `/2/tweets?ids=${pick(ids)}&tweet.fields=${FIELDS}`,
    lookup_100: () => {
      const from = (i++ * 100) % (ids.length - 100)
      return `/2/tweets?ids=${ids.slice(from, from + 100).join(',')}&tweet.fields=${FIELDS}`
    },
    search_page: () =>
      `/2/tweets/search/all?query=conversation_id:${pick(conversations)}&max_results=100&tweet.fields=${FIELDS}`,
    timeline_page: () =>
      `/2/users/${1000 + (i++ % 1000)}/tweets?max_results=100&tweet.fields=${FIELDS}`,
    quote_page: () =>
      `/2/tweets/${pick(quoted)}/quote_tweets?max_results=100&tweet.fields=${FIELDS}`,
    counts: () =>
      `/2/tweets/counts/all?query=conversation_id:${pick(conversations)}&granularity=hour&start_time=${windowStart}&end_time=${windowEnd}`,
  }

  // The API needs a token; create one app in the bench database per run.
  const setup = createDb({ url: benchUrl, poolMax: 1 })
  const app = await createApp(setup, 'bench')
  await setup.destroy()
  const auth = { authorization: `Bearer ${app.bearer_token}` }

  const unknown = ONLY?.filter((name) => !(name in scenarios)) ?? []
  if (unknown.length > 0) {
    throw new Error(
      `--only: no scenario ${unknown.join(', ')} (scenarios: ${Object.keys(scenarios).join(', ')})`,
    )
  }
  const api = await startChild('serve-api')
  const baseline = await startChild('serve-baseline')
  const figures: Record<string, { api: LoadFigures; baseline: LoadFigures; ratio: number }> = {}
  try {
    // Check both answer each scenario the same way before timing anything.
    for (const [name, path] of Object.entries(scenarios)) {
      const p = path()
      const [a, b] = await Promise.all([
        fetch(api.url + p, { headers: auth }).then((r) => r.json()),
        fetch(baseline.url + p).then((r) => r.json()),
      ])
      // The baseline cannot sign a next_token (an HMAC of the API's secret).
      delete (a as { meta?: { next_token?: string } }).meta?.next_token
      if (JSON.stringify(a) !== JSON.stringify(b)) {
        throw new Error(
          `${name}: the servers disagree\napi: ${JSON.stringify(a).slice(0, 400)}\nbaseline: ${JSON.stringify(b).slice(0, 400)}`,
        )
      }
    }
    for (const [name, path] of Object.entries(scenarios)) {
      if (ONLY && !ONLY.includes(name)) continue
      await load(api.url, path, auth, { connections: CONNECTIONS, duration: 2 }) // warm-up
      await load(baseline.url, path, {}, { connections: CONNECTIONS, duration: 2 })
      // Alternating rounds (A-B, B-A, …), each pair giving one ratio; the median of those is
      // the figure, so a burst of load from elsewhere on a shared machine moves one pair, not it.
      const rounds = Math.max(2, Math.round(DURATION / 2))
      const as: LoadFigures[] = []
      const bs: LoadFigures[] = []
      for (let r = 0; r < rounds; r++) {
        if (r % 2 === 0) {
          as.push(await load(api.url, path, auth, { connections: CONNECTIONS, duration: 2 }))
          bs.push(await load(baseline.url, path, {}, { connections: CONNECTIONS, duration: 2 }))
        } else {
          bs.push(await load(baseline.url, path, {}, { connections: CONNECTIONS, duration: 2 }))
          as.push(await load(api.url, path, auth, { connections: CONNECTIONS, duration: 2 }))
        }
      }
      const a = combine(as)
      const b = combine(bs)
      const pairs = as.map((x, r) => x.rps / bs[r]!.rps).sort((x, y) => x - y)
      const ratio = Math.round(median(pairs) * 100) / 100
      const spread = `${pairs[0]!.toFixed(2)}–${pairs.at(-1)!.toFixed(2)}`
      figures[name] = { api: a, baseline: b, ratio }
      console.log(
        `${name.padEnd(12)} api ${a.rps} req/s p50 ${a.p50} ms p99 ${a.p99} ms | baseline ${b.rps} req/s p50 ${b.p50} ms p99 ${b.p99} ms | ratio ${ratio} (median of ${rounds} rounds, ${spread})` +
          (a.errors + a.non2xx + b.errors + b.non2xx > 0
            ? ` (errors ${a.errors}/${b.errors}, non-2xx ${a.non2xx}/${b.non2xx})`
            : ''),
      )
    }
  } finally {
    await stopChild(api.child)
    await stopChild(baseline.child)
  }
  const ratio = Math.min(...Object.values(figures).map((f) => f.ratio))
  console.log(
    JSON.stringify({
      bench: 'api',
      posts,
      connections: CONNECTIONS,
      duration_s: DURATION,
      ...Object.fromEntries(
        Object.entries(figures).map(([k, f]) => [
          k,
          {
            rps: f.api.rps,
            p50_ms: f.api.p50,
            p99_ms: f.api.p99,
            baseline_rps: f.baseline.rps,
            baseline_p99_ms: f.baseline.p99,
            ratio: f.ratio,
          },
        ]),
      ),
      ratio,
    }),
  )
}

const mode = positionals[0]
if (mode === 'serve-api') await serveApi(benchUrl, 'bench-api')
else if (mode === 'serve-baseline') await serveBaseline()
else await main()
