import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { sql } from '@threadline/db'
import { ComplianceMarks, SweepStore, type ComplianceOptions } from '@threadline/ingest'
import { createSimulator, type SimPost, type Simulator } from '@threadline/simulator'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { startTestServer, storeLines } from '@threadline/testing/api'
import { fastOptions, startIngest, startWriter } from './harness.js'

/**
 * Compliance from the upstream, end to end against the simulator (docs/architecture.md,
 * "Compliance"): what the simulator's world withdraws reaches Threadline's lookup through the
 * compliance streams (through a reconnect) and through the sweep of batch jobs (through a failed
 * job and a leader restart).
 */
const TOKEN = 'sim-token'
/** From the withdrawal upstream to the Post unservable through lookup, on a loaded CI box. */
const DEADLINE_MS = 15_000
let env: TestEnv
let sim: Simulator
let stored: SimPost[]
let api: Awaited<ReturnType<typeof startTestServer>>

const JOBS: ComplianceOptions = {
  mode: 'jobs',
  intervalMs: 3_600_000,
  jobMaxIds: 100,
  pollMs: 20,
  pollMaxMs: 100,
  jobTimeoutMs: 10_000,
}

beforeAll(async () => {
  env = await createTestEnv()
  sim = createSimulator({
    port: 0,
    rate: 0,
    seed: 45,
    bearerToken: TOKEN,
    keepAliveMs: 100,
    complianceJobMs: 50,
    world: { users: 60, historyPosts: 400, demoConversations: 1 },
  })
  await sim.start()
  env.defer(() => sim.close())
  await startWriter(env)
  api = await startTestServer(env)
  // The world's Posts, stored as the stream would have brought them.
  stored = [...sim.world.newestFirst()].filter((p) => p.kind !== 'retweet').slice(0, 300)
  const lines = stored.map((p) => {
    const author = sim.world.user(p.authorId)!
    return `{"data":${sim.world.json(p)},"includes":{"users":[${author.json}]}}`
  })
  await storeLines(env.db, lines)
})
afterAll(() => env?.close())

beforeEach(async () => {
  // Each test sweeps from nothing.
  await env.redis.del(new SweepStore(env.redis, env.prefix).key)
})

/** A Post's withdrawal as stored: `deleted` (content erased), `hidden`, or none. */
async function withdrawn(id: string): Promise<string | null> {
  const { rows } = await sql<{ withdrawn: string | null; text: string }>`
    SELECT withdrawn, text FROM posts WHERE id = ${id}::bigint`.execute(env.db)
  const row = rows[0]
  if (row?.withdrawn === 'deleted' && row.text !== '') return 'deleted, content kept'
  return row?.withdrawn ?? null
}

/** What Threadline's lookup answers for one id: `served`, or its error's type. */
async function lookup(id: string): Promise<string> {
  const res = await api.server.app.inject({
    method: 'GET',
    url: `/2/tweets?ids=${id}`,
    headers: { authorization: `Bearer ${api.token}` },
  })
  const body = res.json<{ data?: unknown[]; errors?: Array<{ type: string }> }>()
  if (body.data?.length) return 'served'
  return body.errors?.[0]?.type ?? `status ${res.statusCode}`
}
const NOT_FOUND = 'https://api.twitter.com/2/problems/resource-not-found'
const NOT_AUTHORIZED = 'https://api.twitter.com/2/problems/not-authorized-for-resource'

/** A stored Post the world has not withdrawn, of an author nobody withdrew. */
function untouched(skip: Set<string>): SimPost {
  const w = sim.compliance.withdrawals
  const post = stored.find((p) => !skip.has(p.id) && !w.postState(p.id) && !w.userState(p.authorId))
  if (!post) throw new Error('no untouched Post left')
  skip.add(post.id)
  return post
}
const used = new Set<string>()

/** The live stored Post of the lowest id nobody used: it goes in a sweep's first job. */
function lowestUntouched(): SimPost {
  const post = [...stored]
    .sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1))
    .find((p) => !used.has(p.id) && !sim.compliance.withdrawals.postState(p.id))!
  used.add(post.id)
  return post
}

/** Waits until lookup answers `answer` for Post `id`, within the deadline of a withdrawal. */
const waitForLookup = (what: string, id: string, answer: string) =>
  waitFor(what, async () => (await lookup(id)) === answer, { timeoutMs: DEADLINE_MS })

/** An ingest that sweeps through batch jobs every `intervalMs`. */
const startSweeping = (intervalMs: number) =>
  startIngest(
    env,
    fastOptions(sim.url, {
      upstreamBearerToken: TOKEN,
      compliance: { ...JOBS, intervalMs },
    }),
  )

describe('compliance streams (UPSTREAM_COMPLIANCE=stream)', () => {
  it('a Post deleted upstream becomes unservable, also when deleted while the streams were down', async () => {
    const { ingest } = await startIngest(
      env,
      fastOptions(sim.url, { upstreamBearerToken: TOKEN, compliance: { ...JOBS, mode: 'stream' } }),
    )
    await waitFor('eight compliance connections', () => sim.compliance.stats().streams === 8)
    const first = untouched(used)
    expect(await lookup(first.id)).toBe('served')
    sim.compliance.withdrawals.deletePost(first.id)
    await waitForLookup('the deleted Post unservable', first.id, NOT_FOUND)

    expect(await withdrawn(first.id)).toBe('deleted')

    // Deleted while no stream is connected: only the replay after the reconnect brings it.
    const second = untouched(used)
    sim.faults.failNext(8, { status: 503, route: 'compliance' })
    sim.compliance.dropStreams()
    sim.compliance.withdrawals.deletePost(second.id)
    await waitFor('the streams back', () => sim.compliance.stats().streams === 8)
    await waitForLookup('the Post deleted during the outage unservable', second.id, NOT_FOUND)
    expect(await withdrawn(second.id)).toBe('deleted')

    // A gap longer than backfill_minutes (the marks ten minutes old, the event eight): only a
    // replay by start_time from the mark brings it.
    const late = untouched(used)
    sim.faults.failNext(8, { status: 503, route: 'compliance' })
    sim.compliance.dropStreams()
    const tenMinutesAgo = String(Date.now() - 10 * 60_000)
    const marks = new ComplianceMarks(env.redis, env.prefix)
    for (const kind of ['tweet', 'user']) {
      for (const p of [1, 2, 3, 4]) await env.redis.hset(marks.key, `${kind}-${p}`, tenMinutesAgo)
    }
    sim.compliance.withdrawals.apply({
      kind: 'tweet',
      id: late.id,
      authorId: late.authorId,
      action: 'delete',
      eventAt: new Date(Date.now() - 8 * 60_000).toISOString(),
    })
    await waitForLookup('the Post deleted before the mark’s window unservable', late.id, NOT_FOUND)
    // A protected author hides their Posts (X: not authorized).
    const third = untouched(used)
    sim.compliance.withdrawals.apply({ kind: 'user', id: third.authorId, action: 'user_protect' })
    await waitForLookup('the protected author’s Post unservable', third.id, NOT_AUTHORIZED)
    expect(await withdrawn(third.id)).toBe('hidden')

    // An edit: the Post is fetched again through the upstream's lookup and its new text stored.
    const edited = untouched(used)
    sim.compliance.withdrawals.apply({
      kind: 'tweet',
      id: edited.id,
      authorId: edited.authorId,
      action: 'tweet_edit',
      initialTweetId: edited.id,
      editTweetIds: [edited.id],
    })
    await waitFor(
      'the edited text stored',
      async () => {
        const { rows } = await sql<{ text: string }>`
          SELECT text FROM posts WHERE id = ${edited.id}::bigint`.execute(env.db)
        return rows[0]?.text.endsWith('(edited)') === true
      },
      { timeoutMs: DEADLINE_MS },
    )
    await ingest.close()
  })
})

describe('the sweep through batch jobs (UPSTREAM_COMPLIANCE=jobs)', () => {
  /**
   * The lowest live Post (in the first job) deleted upstream and a sweep started whose first job
   * `fault` fails: the first sweep ends with one failure and the Post still served.
   */
  async function sweepFailingFirstJob(fault: () => void) {
    const post = lowestUntouched()
    sim.compliance.withdrawals.deletePost(post.id)
    fault()
    const store = new SweepStore(env.redis, env.prefix)
    const { ingest } = await startSweeping(1_500)
    const first = await waitForSweep(store, (s) => s.lastFinishedAt !== undefined)
    expect(first.failures).toBe(1)
    expect(await lookup(post.id)).toBe('served')
    return { post, store, ingest, first }
  }

  it('retries a failed job on the next sweep', async () => {
    // The first job fails once.
    const failNext = () => sim.compliance.jobFaults.failNext(1)
    const { post, store, ingest, first } = await sweepFailingFirstJob(failNext)
    expect(first.lastCompleteAt).toBeUndefined()
    const second = await waitForSweep(store, (s) => s.lastCompleteAt !== undefined)
    expect(second.failures).toBe(0)
    await waitForLookup('the deleted Post unservable', post.id, NOT_FOUND)
    expect(await withdrawn(post.id)).toBe('deleted')
    await ingest.close()
  })

  it('counts a job whose results cannot be read as failed after a few tries, and retries it next sweep', async () => {
    // The first job's results cannot be read five times.
    const { post, ingest } = await sweepFailingFirstJob(() =>
      sim.compliance.jobFaults.failDownloads(5),
    )
    await waitForLookup('the deleted Post unservable', post.id, NOT_FOUND)
    await ingest.close()
  })

  it('reverses on a later sweep what X no longer withdraws', async () => {
    const post = untouched(used)
    sim.compliance.withdrawals.apply({ kind: 'user', id: post.authorId, action: 'user_protect' })
    const { ingest } = await startSweeping(1_000)
    await waitForLookup('the protected author’s Post hidden', post.id, NOT_AUTHORIZED)
    sim.compliance.withdrawals.apply({ kind: 'user', id: post.authorId, action: 'user_unprotect' })
    await waitForLookup('the Post served again', post.id, 'served')
    expect(await withdrawn(post.id)).toBeNull()
    await ingest.close()
  })

  it('a restarted leader continues the sweep where it stopped', async () => {
    const store = new SweepStore(env.redis, env.prefix)
    const options = fastOptions(sim.url, {
      upstreamBearerToken: TOKEN,
      compliance: { ...JOBS, jobMaxIds: 10 },
    })
    const before = sim.compliance.stats().jobsCreated
    const a = await startIngest(env, options, 'ingest-a')
    const mid = await waitForSweep(store, (s) => s.type === 'tweets' && BigInt(s.afterId) > 0n)
    await a.ingest.close()
    const stopped = await store.read()
    expect(stopped.startedAt).toBeDefined()
    expect(stopped.lastFinishedAt).toBeUndefined()
    expect(BigInt(stopped.afterId)).toBeGreaterThanOrEqual(BigInt(mid.afterId))

    await startIngest(env, options, 'ingest-b')
    const done = await waitForSweep(store, (s) => s.lastCompleteAt !== undefined)
    expect(done.startedAt).toBeUndefined()
    // One job per chunk of ten ids, Posts then users, and at most one chunk done twice.
    const { rows } = await sql<{ posts: string; users: string }>`
      SELECT (SELECT count(*) FROM posts WHERE withdrawn IS DISTINCT FROM 'deleted')::text AS posts, (SELECT count(*) FROM users)::text AS users`.execute(
      env.db,
    )
    const chunks = Math.ceil(Number(rows[0]!.posts) / 10) + Math.ceil(Number(rows[0]!.users) / 10)
    const jobs = sim.compliance.stats().jobsCreated - before
    expect(jobs).toBeGreaterThanOrEqual(chunks)
    expect(jobs).toBeLessThanOrEqual(chunks + 1)
  })
})

async function waitForSweep(
  store: SweepStore,
  until: (s: Awaited<ReturnType<SweepStore['read']>>) => boolean,
) {
  let last: Awaited<ReturnType<SweepStore['read']>> | undefined
  await waitFor(
    'the sweep state',
    async () => {
      last = await store.read()
      return until(last)
    },
    { timeoutMs: 30_000 },
  )
  return last!
}
