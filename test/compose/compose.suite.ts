import { beforeAll, describe, expect, it } from 'vitest'
import { waitFor, waitForValue } from '@threadline/testing'
import { Compose, complaints, type Complaint } from './compose.js'
import { requireDocker, SuiteRun } from './suite-run.js'

/**
 * The production path as a user with Docker takes it (`pnpm test:compose`): the image built from
 * infra/Dockerfile, the stack of docker-compose.yml up with the simulator profile under a project
 * name of its own, an app made with `docker compose run --rm api apps create`, a rule added and
 * Posts read through the published API port, three writers with one killed mid-burst, and a clean
 * stop. The stack (volumes too) is removed at the end; the logs are kept only when something failed.
 */

const PROJECT = 'threadline-compose-test'
const WRITERS = 3
/** Posts the simulator makes in the burst, in chunks, a writer killed after the first third. */
const BURST = { chunks: 6, size: 2_000 }
/** Words of the simulator's vocabulary, in its languages: a rule that most of its Posts match. */
const BROAD = [
  'source today great deploy build stream wow thanks backfill point postgres nope follow wait',
  'sure good redis worker fix read agree data bad test rule throughput',
  'datos hilo bueno noticias ニュース データ merci obrigado danke',
]
  .join(' ')
  .split(' ')
  .join(' OR ')
/**
 * Lines that read as warnings or errors and come from Postgres's own housekeeping, the images or
 * the host, not from Threadline. Each names the container it may appear in and why it is not ours.
 */
const NOT_OURS: { container: RegExp; line: RegExp; why: string }[] = [
  {
    container: /-redis-/,
    line: /WARNING Memory overcommit must be enabled/,
    why: "the host kernel's vm.overcommit_memory, which a container cannot set (the official image says the same)",
  },
  {
    container: /-postgres-/,
    line: /initdb: warning: enabling "trust" authentication for local connections/,
    why: "initdb's note on the socket inside the container, printed by the official image's entrypoint too; TCP needs the password",
  },
  {
    container: /-postgres-/,
    line: /FATAL: {2}terminating autovacuum process due to administrator command/,
    why: 'how Postgres reports the autovacuum worker it stops when it shuts down',
  },
  {
    container: /-postgres-/,
    line: /ERROR: {2}canceling autovacuum task/,
    why: "Postgres's own autovacuum giving way to a query that wants its lock (it retries later)",
  },
  {
    container: /-postgres-/,
    line: /FATAL: {2}connection to client lost/,
    why: 'the backend of the writer this suite kills, finding its client gone when its statement ends',
  },
  {
    container: /-postgres-/,
    line: /FATAL: {2}the database system is shutting down/,
    why: 'the health check answered during the shutdown (the services, stopped first, are gone)',
  },
]

/**
 * Posts one writer may have committed but not published when it is killed: its batches in hand
 * (WRITER_CONCURRENCY, 4 in compose) of at most 500 lines (POSTS_BATCH_MAX_LINES).
 */
const STORED_REPEATS_MAX = 4 * 500

interface Sent {
  total: number
  ids: string[]
}

describe('the compose stack, built and run', () => {
  const suite = new SuiteRun('compose')
  const compose = new Compose(PROJECT, suite.emptyEnv)
  const timings = suite.timings
  let apiUrl = ''
  let token = ''
  let killed = ''

  const api = async (path: string, init: RequestInit = {}) => {
    const res = await fetch(`${apiUrl}${path}`, {
      ...init,
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    })
    return { status: res.status, body: (await res.json()) as any }
  }

  const storedIds = async () =>
    new Set((await compose.sql('SELECT id FROM posts')).map((r) => r[0]))

  beforeAll(async () => {
    await requireDocker()
    // A run that was itself killed leaves its stack behind.
    await compose.run(['down', '--volumes', '--remove-orphans', '--timeout', '5'])
    await suite.step(async () => {
      timings.build_ms = (await compose.run(['build'], 600_000)).ms
      const up = ['up', '--detach', '--wait', '--no-build', '--scale', `writer=${WRITERS}`]
      timings.up_to_healthy_ms = (await compose.run(up, 300_000)).ms
      const port = (await compose.run(['port', 'api', '3000'])).stdout.trim()
      apiUrl = `http://127.0.0.1:${port.split(':').pop()}`
    })
  }, 900_000)

  suite.registerEnd(
    compose,
    async () => (await compose.run(['down', '--volumes', '--remove-orphans'], 180_000)).ms,
    300_000,
  )

  it('creates an app with `docker compose run --rm api apps create`', async () => {
    const created = await compose.run([
      'run',
      '--rm',
      '-T',
      'api',
      'apps',
      'create',
      '--name',
      'it',
    ])
    timings.apps_create_ms = created.ms
    const app = JSON.parse(created.stdout) as { app_id: string; bearer_token: string }
    expect(app.app_id).toMatch(/^\d+$/)
    token = app.bearer_token
    // The one-off container is gone (--rm), the services are not.
    const states = await compose.states()
    expect(states.filter((s) => s.service === 'api').map((s) => s.running)).toEqual([true])
  })

  it('stores and serves a conversation after a conversation_id: rule added through the API', async () => {
    const started = Date.now()
    const demo = await compose.simulator<{ conversation_ids: string[] }>('GET', '/_sim/demo')
    const conversation = demo.conversation_ids[0]!
    const added = await api('/2/tweets/search/stream/rules', {
      method: 'POST',
      body: JSON.stringify({ add: [{ value: `conversation_id:${conversation}` }] }),
    })
    expect(added.status).toBe(201)
    expect(added.body.meta.summary.created).toBe(1)

    const query = encodeURIComponent(`conversation_id:${conversation}`)
    const found = await waitForValue(
      'the conversation served by search',
      async () => {
        const page = await api(
          `/2/tweets/search/recent?query=${query}&tweet.fields=conversation_id`,
        )
        return page.body.data?.length > 0 ? (page.body.data as any[]) : undefined
      },
      { timeoutMs: 90_000, intervalMs: 500 },
    )
    timings.rule_to_served_ms = Date.now() - started
    expect(found.every((p) => p.conversation_id === conversation)).toBe(true)
    const stored = await storedIds()
    expect(found.filter((p) => !stored.has(p.id))).toEqual([])

    const counts = await api(`/2/tweets/counts/recent?query=${query}`)
    expect(counts.status).toBe(200)
    expect(counts.body.meta.total_tweet_count).toBeGreaterThanOrEqual(found.length)

    // The conversation routes, where this version has them (a 404 is a version without them).
    const thread = await api(`/2/conversations/${conversation}`)
    if (thread.status !== 404) {
      expect(thread.status).toBe(200)
      expect(JSON.stringify(thread.body)).toContain(conversation)
    }
  })

  it(`keeps every Post of a burst exactly once while one of ${WRITERS} writers is SIGKILLed`, async () => {
    const rule = await api('/2/tweets/search/stream/rules', {
      method: 'POST',
      body: JSON.stringify({ add: [{ value: BROAD }] }),
    })
    expect(rule.body.meta.summary).toMatchObject({ created: 1, invalid: 0 })
    // The ingest mirrors the apps' rules upstream; the burst counts once it is there.
    await waitFor(
      'the rule upstream',
      async () => {
        const upstream = await compose.simulator<{ data?: { value: string }[] }>(
          'GET',
          '/2/tweets/search/stream/rules',
        )
        return upstream.data?.some((r) => r.value === BROAD) ?? 'no rules upstream'
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    )
    const writers = (await compose.states()).filter((s) => s.service === 'writer' && s.running)
    expect(writers).toHaveLength(WRITERS)

    const started = Date.now()
    const before = (await storedIds()).size
    for (let chunk = 0; chunk < BURST.chunks; chunk++) {
      await compose.simulator('POST', '/_sim/emit', { count: BURST.size })
      if (chunk === Math.floor(BURST.chunks / 3) - 1) {
        // Mid-burst: once the writers are storing it, one dies without a chance to clean up.
        await waitFor(
          'the writers storing the burst',
          async () => {
            const [[n]] = (await compose.sql('SELECT count(*) FROM posts')) as [[string]]
            return Number(n) > before
          },
          { timeoutMs: 60_000, intervalMs: 200 },
        )
        killed = writers[1]!.container
        await compose.docker(['kill', '--signal', 'KILL', killed])
      }
    }
    const sent = await compose.simulator<Sent>('GET', '/_sim/sent')
    expect(sent.total).toBeGreaterThan((BURST.chunks * BURST.size) / 2)
    expect(new Set(sent.ids).size).toBe(sent.total)

    let lost: string[] = []
    await waitFor(
      `all ${sent.total} Posts the simulator sent stored`,
      async () => {
        const stored = await storedIds()
        lost = sent.ids.filter((id) => !stored.has(id))
        return lost.length === 0 ? true : `${lost.length} missing`
      },
      { timeoutMs: 180_000, intervalMs: 1_000 },
    ).catch((err: Error) => {
      throw new Error(`${err.message}; first missing: ${lost.slice(0, 5).join(', ')}`)
    })
    timings.burst_stored_ms = Date.now() - started
    timings.burst_posts = sent.total

    // A writer killed between its commit and its publish leaves its outbox rows to another
    // writer's relay, which takes rows at least 5 s old: the outbox drains, later than the rows.
    await waitFor(
      'the outbox drained (every stored batch published)',
      async () => {
        const [[left]] = (await compose.sql('SELECT count(*) FROM outbox')) as [[string]]
        return Number(left) === 0 ? true : `${left} outbox rows not yet published`
      },
      { timeoutMs: 60_000, intervalMs: 500 },
    )

    // Posts are keyed by id, so a repeat shows where it is counted: each conversation's post_count
    // against its Posts, and the `stored` stream.
    const idList = `'{${sent.ids.join(',')}}'::bigint[]`
    const [[stored, conversations, miscounted]] = (await compose.sql(
      `WITH sent AS (SELECT conversation_id AS id, count(*) AS n FROM posts
                       WHERE id = ANY(${idList}) GROUP BY conversation_id)
       SELECT (SELECT coalesce(sum(n), 0) FROM sent),
              (SELECT count(*) FROM sent),
              (SELECT count(*) FROM conversations c JOIN sent USING (id)
                 WHERE c.post_count <> (SELECT count(*) FROM posts p WHERE p.conversation_id = c.id))`,
    )) as [[string, string, string]]
    const published = await compose.storedStreamPostIds()
    const streamed = new Map<string, number>()
    for (const id of published) streamed.set(id, (streamed.get(id) ?? 0) + 1)
    const unpublished = sent.ids.filter((id) => !streamed.has(id))
    const repeated = sent.ids.filter((id) => streamed.get(id)! > 1)
    Object.assign(timings, {
      burst_conversations: Number(conversations),
      burst_stream_repeats: repeated.length,
    })
    expect(Number(stored), 'Posts sent and stored').toBe(sent.total)
    expect(Number(miscounted), 'conversations whose post_count is not their Posts').toBe(0)
    expect(unpublished.slice(0, 5), 'Posts stored but not on the stored stream').toEqual([])
    // A writer killed between its commit and its publish leaves the relay to publish again: a
    // repeat, never a gap (docs/architecture.md); at most what that writer had in hand.
    expect(repeated.length, 'Posts on the stored stream twice').toBeLessThanOrEqual(
      STORED_REPEATS_MAX,
    )
  })

  it('stops every service within its grace period, and no service logged an error or warning', async () => {
    timings.stop_ms = (await compose.run(['stop'], 180_000)).ms
    const states = await compose.states()
    expect(states.length).toBeGreaterThan(WRITERS)
    for (const state of states.filter((s) => s.container !== killed)) {
      expect(state.running, state.container).toBe(false)
      // Docker sends SIGKILL when a grace period runs out: the exit code would be 137.
      expect(state.exitCode, `${state.container} exit code`).toBe(0)
    }

    const found: Complaint[] = []
    for (const [container, log] of await compose.logs()) found.push(...complaints(container, log))
    const ours = found.filter(
      (c) => !NOT_OURS.some((n) => n.container.test(c.container) && n.line.test(c.line)),
    )
    expect(ours.map((c) => `${c.container}: ${c.line.slice(0, 300)}`)).toEqual([])
  })
})
