import { createServer } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { apiDepsFromConfig, apiOptionsFromConfig, createApi, type ApiServer } from '@threadline/api'
import { loadConfig } from '@threadline/config'
import { addRules, createApp, sql } from '@threadline/db'
import {
  createMetrics,
  createProcessMetrics,
  createQueueSampler,
  metricsDepsFromConfig,
  metricsOptionsFromConfig,
} from '@threadline/metrics'
import {
  createIngest,
  ingestDepsFromConfig,
  ingestOptionsFromConfig,
  X_BACKOFF,
} from '@threadline/ingest'
import { addPostsBatch, createQueue, type PostsJob, type PostsJobResult } from '@threadline/queue'
import { createRedis } from '@threadline/redis'
import { withDeadline } from '@threadline/runtime'
import { createSimulator } from '@threadline/simulator'
import {
  createTestEnv,
  generateConversation,
  waitFor,
  waitForValue,
  type TestEnv,
} from '@threadline/testing'
import { composeWriter } from '../writer.js'

/**
 * The roles' metrics as a process exports them (the wiring of `threadline start`): a writer and the
 * API share one registry, served by createProcessMetrics on METRICS_PORT; real batches and requests,
 * then `/metrics` scraped over HTTP.
 */

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

/** A port free right now (the metrics server takes a fixed port; 0 means "disabled" there). */
async function freePort(): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address() as { port: number }
  await new Promise((resolve) => server.close(resolve))
  return port
}

/** Sums the samples of `name` whose labels include `labels` (exposition text format). */
function read(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0
  let seen = false
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line)
    if (!m || m[1] !== name) continue
    const have = new Map(
      [...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((l) => [l[1], l[2]]),
    )
    if (Object.entries(labels).every(([k, v]) => have.get(k) === v)) {
      sum += Number(m[3])
      seen = true
    }
  }
  if (!seen) throw new Error(`no sample ${name} ${JSON.stringify(labels)}`)
  return sum
}

describe('metrics of a writer and an API in one process', () => {
  let scrape: () => Promise<string>
  let api: ApiServer
  let token: string
  let metricsPort: number

  beforeAll(async () => {
    metricsPort = await freePort()
    const config = loadConfig({
      ...env.env,
      PORT: '0',
      METRICS_PORT: String(metricsPort),
    })
    const processMetrics = createProcessMetrics(metricsDepsFromConfig(config, env.logger), {
      ...metricsOptionsFromConfig(config, ['writer', 'api']),
      queueSampleMs: 100,
    })
    await processMetrics.start()
    env.defer(() => processMetrics.close())
    const writer = await composeWriter(config, env.logger, processMetrics.metrics)
    env.defer(() => writer.close())
    await writer.start()
    api = createApi(
      await apiDepsFromConfig(config, env.logger, processMetrics.metrics),
      apiOptionsFromConfig(config),
    )
    env.defer(() => api.close())
    await api.start()
    token = (await createApp(env.db, 'metrics')).bearer_token
    const url = processMetrics.url()
    expect(url).toBe(`http://127.0.0.1:${metricsPort}`)
    scrape = async () => {
      const res = await fetch(`${url}/metrics`)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/)
      return res.text()
    }
  })

  it('counts exactly the Posts the writer stored, its rejects and batches', async () => {
    const before = await scrape()
    expect(read(before, 'threadline_writer_posts_stored_total', { result: 'inserted' })).toBe(0)
    expect(before).toMatch(/^process_resident_memory_bytes\{roles="api,writer"\} \d+/m)

    const { lines } = generateConversation({ size: 130, seed: 11 })
    const queue = createQueue<PostsJob, PostsJobResult>('posts', {
      connection: env.redis,
      prefix: env.prefix,
      logger: env.logger,
    })
    env.defer(() => queue.close())
    const observed = (s: number) => new Date(Date.UTC(2026, 0, 1, 0, 0, s)).toISOString()
    const jobs = [
      { lines: lines.slice(0, 50), observed_at: observed(1) },
      {
        lines: [...lines.slice(50, 100), 'not json', '{"data":{"text":"no id"}}'],
        observed_at: observed(1),
      },
      { lines: lines.slice(100), observed_at: observed(1) },
      // The first batch again, newer: its Posts are updated, not inserted.
      { lines: lines.slice(0, 50), observed_at: observed(9) },
    ]
    for (const job of jobs) {
      await addPostsBatch(queue, env.redis, env.prefix, { source: 'test', ...job })
    }
    await waitFor(
      'every batch stored',
      async () => (await queue.getCompletedCount()) === jobs.length,
    )

    const results = (await queue.getCompleted()).map((j) => j.returnvalue)
    const total = (k: keyof PostsJobResult) => results.reduce((n, r) => n + r[k], 0)
    const stored = Number(
      (await sql<{ n: string }>`SELECT count(*) AS n FROM posts`.execute(env.db)).rows[0]!.n,
    )
    expect(stored).toBe(130)
    expect(total('updated')).toBeGreaterThan(0)

    const after = await scrape()
    expect(read(after, 'threadline_writer_posts_stored_total', { result: 'inserted' })).toBe(stored)
    expect(read(after, 'threadline_writer_posts_stored_total', { result: 'updated' })).toBe(
      total('updated'),
    )
    expect(read(after, 'threadline_writer_rejects_total')).toBe(2)
    expect(read(after, 'threadline_writer_batches_total', { outcome: 'stored' })).toBe(4)
    expect(read(after, 'threadline_writer_batch_lines_count')).toBe(4)
    expect(read(after, 'threadline_writer_batch_lines_sum')).toBe(50 + 52 + 30 + 50)
    expect(read(after, 'threadline_writer_store_duration_seconds_count')).toBe(4)
    expect(read(after, 'threadline_writer_store_duration_seconds_sum')).toBeGreaterThan(0)
    // The sampler saw the posts queue drained (sampled every 100 ms).
    await waitFor('queue sampled', async () => {
      const text = await scrape()
      return read(text, 'threadline_queue_jobs', { queue: 'posts', state: 'waiting' }) === 0 &&
        read(text, 'threadline_queue_oldest_waiting_seconds', { queue: 'posts' }) === 0
        ? true
        : 'posts still waiting in the last sample'
    })
  })

  it('observes API requests by route pattern and status, never by raw URL', async () => {
    const post = (await env.db.selectFrom('posts').select('id').limit(1).executeTakeFirstOrThrow())
      .id
    const auth = { authorization: `Bearer ${token}` }
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${api.url()}/2/tweets/${post}`, { headers: auth })
      expect(res.status).toBe(200)
    }
    expect((await fetch(`${api.url()}/2/tweets/${post}`)).status).toBe(401)
    expect((await fetch(`${api.url()}/no/such/${post}`, { headers: auth })).status).toBe(404)

    const { text } = await waitForValue('requests observed', async () => {
      const t = await scrape()
      return t.includes('status="404"') ? { text: t } : undefined
    })
    const ok = { method: 'GET', route: '/2/tweets/:id', status: '200' }
    expect(read(text, 'threadline_http_requests_total', ok)).toBe(3)
    expect(read(text, 'threadline_http_request_duration_seconds_count', ok)).toBe(3)
    expect(
      read(text, 'threadline_http_request_duration_seconds_bucket', { ...ok, le: '+Inf' }),
    ).toBe(3)
    expect(read(text, 'threadline_http_request_duration_seconds_sum', ok)).toBeGreaterThan(0)
    expect(read(text, 'threadline_http_requests_total', { ...ok, status: '401' })).toBe(1)
    expect(
      read(text, 'threadline_http_requests_total', {
        method: 'GET',
        route: 'unmatched',
        status: '404',
      }),
    ).toBe(1)
    // Ids stay out of labels: the series are bounded by the routes, not by the requests.
    expect(text).not.toContain(post)
  })

  it('shows an open filtered stream while it is open, and counts it when it closes', async () => {
    const app = await createApp(env.db, 'metrics-stream')
    await addRules(env.db, app.app_id, [{ value: 'hello' }], { cap: 10 })
    const stream = { stream: 'search-stream' }
    expect(read(await scrape(), 'threadline_api_stream_connections', stream)).toBe(0)
    const res = await fetch(`${api.url()}/2/tweets/search/stream`, {
      headers: { authorization: `Bearer ${app.bearer_token}` },
    })
    expect(res.status).toBe(200)
    await waitFor('stream counted open', async () =>
      read(await scrape(), 'threadline_api_stream_connections', stream) === 1 ? true : undefined,
    )
    // The server ends it (shutdown sends the disconnect line); /metrics has its own port and stays.
    // @NOTE not a client abort: after one, api.close() waits out the 72 s keep-alive (reported).
    await api.close()
    expect(await res.text()).toContain('OperationalDisconnect')
    const text = await scrape()
    expect(read(text, 'threadline_api_stream_connections', stream)).toBe(0)
    const route = { method: 'GET', route: '/2/tweets/search/stream', status: '200' }
    expect(read(text, 'threadline_http_requests_total', route)).toBe(1)
    // A stream's lifetime is not a request latency.
    expect(text).not.toMatch(/threadline_http_request_duration_seconds_count\{[^}]*search\/stream"/)
  })

  it('carries on without a server when the port is taken', async () => {
    const config = loadConfig({ ...env.env, METRICS_PORT: String(metricsPort) })
    const second = createProcessMetrics(
      metricsDepsFromConfig(config, env.logger),
      metricsOptionsFromConfig(config, ['writer']),
    )
    await second.start()
    env.defer(() => second.close())
    expect(second.url()).toBeUndefined()
    const offConfig = loadConfig({ ...env.env, METRICS_PORT: '0' })
    const off = createProcessMetrics(
      metricsDepsFromConfig(offConfig, env.logger),
      metricsOptionsFromConfig(offConfig, ['writer']),
    )
    await off.start()
    expect(off.url()).toBeUndefined()
    await off.close()
  })
})

describe('queue sampler', () => {
  it('reports depths and the age of the oldest waiting job', async () => {
    const prefix = `${env.prefix}:sampler`
    const queue = createQueue<{ n: number }>('backfill', {
      connection: env.redis,
      prefix,
      logger: env.logger,
    })
    env.defer(() => queue.close())
    const first = await queue.add('conv', { n: 1 })
    await queue.add('conv', { n: 2 })
    await queue.add('conv', { n: 3 })
    await queue.add('conv', { n: 4 }, { delay: 60_000 })
    const metrics = createMetrics({ defaultMetrics: false })
    const sampler = createQueueSampler({
      registry: metrics.registry,
      redis: env.redis,
      prefix,
      queues: ['backfill'],
      intervalMs: 60_000,
      logger: env.logger,
      now: () => first.timestamp + 90_000,
    })
    env.defer(() => sampler.close())
    await sampler.sample()
    const text = await metrics.text()
    const q = { queue: 'backfill' }
    expect(read(text, 'threadline_queue_jobs', { ...q, state: 'waiting' })).toBe(3)
    expect(read(text, 'threadline_queue_jobs', { ...q, state: 'delayed' })).toBe(1)
    expect(read(text, 'threadline_queue_jobs', { ...q, state: 'active' })).toBe(0)
    expect(read(text, 'threadline_queue_jobs', { ...q, state: 'failed' })).toBe(0)
    // The oldest is the first added: exactly 90 s before the injected clock.
    expect(read(text, 'threadline_queue_oldest_waiting_seconds', q)).toBe(90)
    expect(read(text, 'threadline_queue_sample_errors_total', q)).toBe(0)
  })

  it('counts a sample as failed and closes promptly when Redis never answered', async () => {
    // Nothing listens on port 1: the connection is never ready, and BullMQ waits for it to be.
    const redis = createRedis('redis://127.0.0.1:1', 'producer', 'sampler-test')
    redis.on('error', () => {})
    env.defer(async () => redis.disconnect())
    const metrics = createMetrics({ defaultMetrics: false })
    const sampler = createQueueSampler({
      registry: metrics.registry,
      redis,
      prefix: `${env.prefix}:sampler-down`,
      queues: ['posts'],
      intervalMs: 1_000,
      logger: env.logger,
    })
    sampler.start()
    await waitFor(
      'a failed sample counted',
      async () =>
        read(await metrics.text(), 'threadline_queue_sample_errors_total', { queue: 'posts' }) >= 1,
      { timeoutMs: 10_000 },
    )
    // Without the deadlines, close() waited for the sample begun at start(), for ever.
    await withDeadline(5_000, 'sampler close', () => sampler.close())
  })
})

describe('ingest metrics against the simulator', () => {
  it('counts stream lines, backfill pages, reconnects by cause and the lease', async () => {
    const token = 'sim-token'
    const sim = createSimulator({
      port: 0,
      rate: 0,
      seed: 5,
      bearerToken: token,
      keepAliveMs: 100,
      world: { users: 50, historyPosts: 300, demoConversations: 1 },
    })
    await sim.start()
    env.defer(() => sim.close())
    const config = loadConfig({
      ...env.env,
      METRICS_PORT: '0',
      UPSTREAM_BEARER_TOKEN: token,
      UPSTREAM_SEARCH: 'all',
    })
    const metrics = createMetrics({ defaultMetrics: false })
    const upstream = { ...config, UPSTREAM_URL: sim.url }
    const ingest = createIngest(await ingestDepsFromConfig(upstream, env.logger, metrics), {
      ...ingestOptionsFromConfig(upstream),
      reconcileMs: 500,
      rulesDebounceMs: 20,
      backoff: { ...X_BACKOFF, networkStepMs: 20 },
      noRulesRetryMs: 200,
      leaseMs: 1_500,
    })
    env.defer(() => ingest.close())
    await ingest.start()
    const value = async (name: string, labels: Record<string, string> = {}) => {
      try {
        return read(await metrics.text(), name, labels)
      } catch {
        return 0 // no series yet
      }
    }

    const conversationId = sim.demoConversations()[0]!
    const app = await createApp(env.db, 'metrics-ingest')
    await addRules(env.db, app.app_id, [{ value: `conversation_id:${conversationId}` }], {
      cap: 10,
    })
    await waitFor('leading and connected', async () =>
      (await value('threadline_ingest_leader')) === 1 &&
      (await value('threadline_ingest_stream_connects_total')) >= 1
        ? true
        : undefined,
    )
    await waitFor('backfill pages handed on', async () =>
      (await value('threadline_ingest_backfill_pages_total')) >= 1 ? true : undefined,
    )

    for (let i = 0; i < 5; i++) sim.reply(conversationId)
    await waitFor('five stream lines read', async () =>
      (await value('threadline_ingest_stream_lines_total')) >= 5 ? true : undefined,
    )
    await waitFor('the lines queued', async () =>
      (await value('threadline_ingest_lines_queued_total', { source: 'stream' })) ===
      (await value('threadline_ingest_stream_lines_total'))
        ? true
        : undefined,
    )

    // A cut socket: one reconnect, labelled by its cause, then a second connection.
    // (A 409 before the rule reached the upstream may already count as `no-rules`.)
    const cut = async () =>
      (await value('threadline_ingest_reconnects_total', { cause: 'network' })) +
      (await value('threadline_ingest_reconnects_total', { cause: 'ended' }))
    expect(await cut()).toBe(0)
    sim.faults.dropStreams({ graceful: false })
    await waitFor('a reconnect counted', async () =>
      (await value('threadline_ingest_stream_connects_total')) >= 2 ? true : undefined,
    )
    expect(await cut()).toBeGreaterThanOrEqual(1)
    const text = await metrics.text()
    expect(read(text, 'threadline_ingest_batches_queued_total', { source: 'backfill' })).toBe(
      read(text, 'threadline_ingest_backfill_pages_total'),
    )
  })
})
