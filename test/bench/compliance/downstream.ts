import { buildServer } from '@threadline/api'
import { createApp, createDb, sql, withdrawnAmong } from '@threadline/db'
import { silentLogger } from '@threadline/logger'
import { createRedis } from '@threadline/redis'
import { log, type BenchEnv } from '../lib/setup.js'

/** X's snowflake epoch (ms). */
const TWEPOCH = 1288834974657
/** The stored Posts span this many days ending now: several of the store's daily partitions. */
const SPAN_DAYS = 4
/** docs/api.md §8.1: a downstream job checks 1 M ids in under this. */
const TARGET_S = 30
/** Ids per statement of the baseline, as the job's check chunks them. */
const BASELINE_CHUNK = 20_000

export type DownstreamJobFigures = {
  job_posts: number
  job_ids: number
  job_withdrawn_found: number
  job_upload_s: number
  job_check_s: number
  job_download_s: number
  job_total_s: number
  job_baseline_s: number
  job_ratio: number
  job_target_s: number
  job_target_met: boolean
}

/** The sizes part 2 measures at: 1 M ids asked of a store of 1 M Posts, one in 10 deleted. */
export const DOWNSTREAM_DEFAULTS = { posts: 1_000_000, ids: 1_000_000, withdrawnEvery: 10 }

/**
 * Part 2 of `pnpm bench compliance` (test/bench/compliance.ts calls it with its BenchEnv): a
 * client's batch compliance job, docs/api.md §8.1.
 */
export async function downstream(env: BenchEnv): Promise<DownstreamJobFigures> {
  return downstreamJobs(env, DOWNSTREAM_DEFAULTS)
}

/**
 * The time a client's batch compliance job takes over `ids` ids against a store of `posts` Posts
 * (one in `withdrawnEvery` deleted, spread over 4 days of partitions): the upload of the ids to the
 * job's upload URL, the wait until the job is complete (polled every 100 ms), and the download of
 * its result, through an API server over HTTP on `env`'s schema. The Posts are its own (their
 * snowflake sequence is never 0, so they meet no other part's), and so are the ids it asks.
 * Baseline: the check alone, the same ids given to withdrawnAmong in chunks of 20 k in this
 * process (no HTTP, no staging, no job). `job_ratio` is the job's time over the baseline's.
 */
export async function downstreamJobs(
  env: BenchEnv,
  opts: { posts: number; ids: number; withdrawnEvery: number },
): Promise<DownstreamJobFigures> {
  const redis = createRedis(env.redisUrl, 'producer', 'bench-compliance-jobs')
  const server = buildServer(
    {
      db: createDb({ url: env.databaseUrl, poolMax: 8 }),
      redis,
      logger: silentLogger(),
      tokenSecrets: { current: 'bench-compliance' },
    },
    {
      host: '127.0.0.1',
      port: 0,
      prefix: env.prefix,
      rateLimits: { lookup: 1e6, search: 1e6, counts: 1e6, rules: 1e6 },
      ruleCap: 1000,
      queryMaxLength: 1024,
      bodyLimit: 1_048_576,
      tokenCacheMs: 60_000,
    },
  )
  try {
    log(`compliance jobs: storing ${opts.posts} Posts, one in ${opts.withdrawnEvery} deleted…`)
    const now = Date.now()
    const strideMs = Math.max(1, Math.floor((SPAN_DAYS * 86_400_000) / opts.posts))
    await sql`
      INSERT INTO posts (id, conversation_id, author_id, text, created_at, lang, raw, observed_at,
        withdrawn, withdrawn_reason, withdrawn_at)
      SELECT s.id, s.id, 1000 + g % 1000,
        CASE WHEN g % ${opts.withdrawnEvery}::int = 0 THEN '' ELSE 'post ' || g END,
        to_timestamp((${TWEPOCH}::bigint + (s.id >> 22)) / 1000.0), 'en',
        jsonb_build_object('id', s.id::text), now(),
        CASE WHEN g % ${opts.withdrawnEvery}::int = 0 THEN 'deleted' END,
        CASE WHEN g % ${opts.withdrawnEvery}::int = 0 THEN 'deleted' END,
        CASE WHEN g % ${opts.withdrawnEvery}::int = 0 THEN now() END
      FROM generate_series(1, ${opts.posts}::int) AS g
      CROSS JOIN LATERAL (
        SELECT ((${now - TWEPOCH}::bigint - g::bigint * ${strideMs}::bigint) << 22)
          | (g % 4095 + 1) AS id
      ) s`.execute(env.db)
    await sql`ANALYZE posts`.execute(env.db)
    const { rows } = await sql<{ id: string }>`
      SELECT id::text FROM posts WHERE id & 4095 <> 0
      ORDER BY random() LIMIT ${opts.ids}`.execute(env.db)
    const ids = rows.map((r) => r.id)
    // More ids asked than stored: the rest are ids Threadline never saw.
    for (let i = 0; ids.length < opts.ids; i++) ids.push(String(1_000_000_000n + BigInt(i)))
    const body = `${ids.join('\n')}\n`

    await server.start()
    const base = server.url()
    const { bearer_token: token } = await createApp(env.db, 'bench')
    const api = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(`${base}${path}`, {
        ...init,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      })
      return (await res.json()) as { data: Record<string, string> }
    }

    log(`compliance jobs: checking ${ids.length} ids through a job…`)
    const job = (await api('/2/compliance/jobs', { method: 'POST', body: '{"type":"tweets"}' }))
      .data
    const t0 = performance.now()
    const put = await fetch(job.upload_url!, {
      method: 'PUT',
      headers: { 'content-type': 'text/plain' },
      body,
    })
    if (put.status !== 200) throw new Error(`upload refused: ${put.status} ${await put.text()}`)
    const tUploaded = performance.now()
    let status = ''
    for (;;) {
      status = (await api(`/2/compliance/jobs/${job.id}`)).data.status!
      if (status !== 'in_progress') break
      await new Promise((r) => setTimeout(r, 100))
    }
    if (status !== 'complete') throw new Error(`the job ended ${status}`)
    const tComplete = performance.now()
    const result = await (await fetch(job.download_url!)).text()
    const tDone = performance.now()
    const found = result.split('\n').filter((l) => l !== '').length

    log('compliance jobs: baseline, the same ids through withdrawnAmong in one process…')
    const b0 = performance.now()
    let baselineFound = 0
    for (let i = 0; i < ids.length; i += BASELINE_CHUNK) {
      baselineFound += (await withdrawnAmong(env.db, 'tweet', ids.slice(i, i + BASELINE_CHUNK)))
        .length
    }
    const baselineS = (performance.now() - b0) / 1000
    if (baselineFound !== found) {
      throw new Error(`the job found ${found} withdrawn ids, the baseline ${baselineFound}`)
    }

    const s = (ms: number) => Math.round(ms) / 1000
    const total = s(tDone - t0)
    return {
      job_posts: opts.posts,
      job_ids: ids.length,
      job_withdrawn_found: found,
      job_upload_s: s(tUploaded - t0),
      job_check_s: s(tComplete - tUploaded),
      job_download_s: s(tDone - tComplete),
      job_total_s: total,
      job_baseline_s: Math.round(baselineS * 1000) / 1000,
      job_ratio: Math.round((total / baselineS) * 100) / 100,
      job_target_s: TARGET_S,
      job_target_met: total < TARGET_S,
    }
  } finally {
    await server.close()
  }
}
