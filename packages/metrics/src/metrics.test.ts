import { readFileSync } from 'node:fs'
import { describe, expect, it } from 'vitest'
import { queuesForRoles } from './from-config.js'
import { queueMetrics } from './queue-sampler.js'
import { reconnectCause } from './areas.js'
import { createMetrics, type Metrics } from './metrics.js'

/** The value of one series (labels matched exactly, the default labels aside). */
async function value(m: Metrics, name: string, labels: Record<string, string> = {}) {
  const metric = m.registry.getSingleMetric(name)
  if (!metric) throw new Error(`no metric ${name}`)
  const { values } = await metric.get()
  const hit = values.find(
    (v) =>
      Object.keys(labels).length === Object.keys(v.labels).length &&
      Object.entries(labels).every(([k, want]) => String(v.labels[k]) === want),
  )
  return hit?.value
}

describe('metrics', () => {
  it('counts a stored batch: Posts by result, rejects, lines and store time', async () => {
    const m = createMetrics({ defaultMetrics: false })
    const w = m.writer()
    expect(await value(m, 'threadline_writer_posts_stored_total', { result: 'inserted' })).toBe(0)
    w.batchStored({ lines: 120, inserted: 100, updated: 7, users: 12, rejects: 3, seconds: 0.02 })
    w.batchStored({ lines: 5, inserted: 5, updated: 0, users: 1, rejects: 0, seconds: 0.2 })
    w.batchInvalid()
    w.batchFailed()
    w.relayed(4)
    w.relayed(0)
    expect(await value(m, 'threadline_writer_posts_stored_total', { result: 'inserted' })).toBe(105)
    expect(await value(m, 'threadline_writer_posts_stored_total', { result: 'updated' })).toBe(7)
    expect(await value(m, 'threadline_writer_users_stored_total')).toBe(13)
    expect(await value(m, 'threadline_writer_rejects_total')).toBe(4) // 3 lines + 1 invalid job
    expect(await value(m, 'threadline_writer_batches_total', { outcome: 'stored' })).toBe(2)
    expect(await value(m, 'threadline_writer_batches_total', { outcome: 'invalid' })).toBe(1)
    expect(await value(m, 'threadline_writer_batches_total', { outcome: 'failed' })).toBe(1)
    expect(await value(m, 'threadline_writer_relayed_total')).toBe(4)
    const text = await m.text()
    expect(text).toContain('threadline_writer_batch_lines_bucket{le="100"} 1')
    expect(text).toContain('threadline_writer_batch_lines_bucket{le="250"} 2')
    expect(text).toContain('threadline_writer_batch_lines_sum 125')
    expect(text).toContain('threadline_writer_store_duration_seconds_bucket{le="0.025"} 1')
    expect(text).toContain('threadline_writer_store_duration_seconds_count 2')
  })

  it('makes each area once per registry, so roles in one process share it', () => {
    const m = createMetrics({ defaultMetrics: false })
    expect(m.writer()).toBe(m.writer())
    expect(m.api()).toBe(m.api())
    // A second registry is independent (no "already registered" error).
    const other = createMetrics({ defaultMetrics: false })
    expect(other.writer()).not.toBe(m.writer())
  })

  it('labels every series with the process labels and exports process metrics by default', async () => {
    const m = createMetrics({ labels: { roles: 'api,writer' } })
    m.writer()
    const text = await m.text()
    expect(text).toMatch(/^process_cpu_user_seconds_total\{roles="api,writer"\} /m)
    expect(text).toMatch(/^nodejs_heap_size_used_bytes\{roles="api,writer"\} /m)
    expect(text).toContain(
      'threadline_writer_posts_stored_total{result="inserted",roles="api,writer"} 0',
    )
    expect(
      createMetrics({ defaultMetrics: false }).registry.getSingleMetric(
        'nodejs_heap_size_used_bytes',
      ),
    ).toBeUndefined()
  })

  it('keeps HTTP labels bounded: route patterns, known methods, streams out of the histogram', async () => {
    const m = createMetrics({ defaultMetrics: false })
    const api = m.api()
    api.request({
      method: 'GET',
      route: '/2/tweets/:id',
      status: 200,
      seconds: 0.004,
      stream: false,
    })
    api.request({
      method: 'GET',
      route: '/2/tweets/:id',
      status: 200,
      seconds: 0.03,
      stream: false,
    })
    api.request({ method: 'BREW', route: 'unmatched', status: 404, seconds: 0.001, stream: false })
    api.request({
      method: 'GET',
      route: '/2/tweets/search/stream',
      status: 200,
      seconds: 3600,
      stream: true,
    })
    const ok = { method: 'GET', route: '/2/tweets/:id', status: '200' }
    expect(await value(m, 'threadline_http_requests_total', ok)).toBe(2)
    expect(
      await value(m, 'threadline_http_requests_total', {
        method: 'OTHER',
        route: 'unmatched',
        status: '404',
      }),
    ).toBe(1)
    const stream = { method: 'GET', route: '/2/tweets/search/stream', status: '200' }
    expect(await value(m, 'threadline_http_requests_total', stream)).toBe(1)
    const text = await m.text()
    expect(text).toContain(
      'threadline_http_request_duration_seconds_count{method="GET",route="/2/tweets/:id",status="200"} 2',
    )
    expect(text).toContain(
      'threadline_http_request_duration_seconds_bucket{le="0.005",method="GET",route="/2/tweets/:id",status="200"} 1',
    )
    expect(text).not.toMatch(/duration_seconds_count\{[^}]*search\/stream/)
  })

  it('reads open stream connections and the ingest lease at scrape time', async () => {
    const m = createMetrics({ defaultMetrics: false })
    let open = 2
    m.api().streamConnections('search-stream', () => open)
    let held = false
    m.ingest().leader(() => held)
    expect(await value(m, 'threadline_api_stream_connections', { stream: 'search-stream' })).toBe(2)
    expect(await value(m, 'threadline_ingest_leader')).toBe(0)
    open = 0
    held = true
    expect(await value(m, 'threadline_api_stream_connections', { stream: 'search-stream' })).toBe(0)
    expect(await value(m, 'threadline_ingest_leader')).toBe(1)
  })

  it('reads the bearer-token lookups at scrape time', async () => {
    const m = createMetrics({ defaultMetrics: false })
    m.api()
    expect(await value(m, 'threadline_api_token_lookups_total')).toBe(0)
    let made = { queries: 2, tokens: 40 }
    m.api().tokenLookups(() => made)
    expect(await value(m, 'threadline_api_token_lookup_queries_total')).toBe(2)
    made = { queries: 3, tokens: 41 }
    expect(await value(m, 'threadline_api_token_lookups_total')).toBe(41)
    expect(await m.text()).toContain('threadline_api_token_lookups_total 41')
  })

  it('names reconnect causes from a fixed set, never from the reason text', async () => {
    expect(reconnectCause({ reason: '409: no rules' })).toBe('no-rules')
    expect(reconnectCause({ reason: '503: busy', failure: { kind: 'http' } })).toBe('http')
    expect(reconnectCause({ reason: '429: slow down', failure: { kind: 'rate-limit' } })).toBe(
      'rate-limit',
    )
    const network = (reason: string) => reconnectCause({ reason, failure: { kind: 'network' } })
    expect(network('silent for more than 30000 ms')).toBe('stall')
    expect(network('no response headers in time')).toBe('stall')
    expect(network('operational disconnect: ConnectionPurged')).toBe('operational-disconnect')
    expect(network('stream ended')).toBe('ended')
    expect(network('network: fetch failed: ECONNREFUSED')).toBe('network')

    const m = createMetrics({ defaultMetrics: false })
    const ingest = m.ingest()
    ingest.streamEvent({ type: 'connected' })
    ingest.streamEvent({
      type: 'disconnected',
      reason: 'stream ended',
      failure: { kind: 'network' },
    })
    ingest.streamEvent({ type: 'disconnected', reason: 'network: x', failure: { kind: 'network' } })
    ingest.streamEvent({ type: 'disconnected', reason: 'network: y', failure: { kind: 'network' } })
    ingest.streamEvent({ type: 'error-line' })
    ingest.streamLine()
    ingest.backfillPage()
    ingest.batchQueued('stream', 40)
    ingest.batchQueued('backfill', 1)
    expect(await value(m, 'threadline_ingest_stream_connects_total')).toBe(1)
    expect(await value(m, 'threadline_ingest_reconnects_total', { cause: 'network' })).toBe(2)
    expect(await value(m, 'threadline_ingest_reconnects_total', { cause: 'ended' })).toBe(1)
    expect(await value(m, 'threadline_ingest_stream_error_lines_total')).toBe(1)
    expect(await value(m, 'threadline_ingest_stream_lines_total')).toBe(1)
    expect(await value(m, 'threadline_ingest_backfill_pages_total')).toBe(1)
    expect(await value(m, 'threadline_ingest_lines_queued_total', { source: 'stream' })).toBe(40)
    expect(await value(m, 'threadline_ingest_batches_queued_total', { source: 'backfill' })).toBe(1)
  })

  it('counts delivery events by type, webhook outcomes and parked events', async () => {
    const m = createMetrics({ defaultMetrics: false })
    const d = m.delivery()
    d.eventsDerived(['posts.create', 'posts.create', 'profile.update'])
    d.webhookDelivery('delivered', 0.05)
    d.webhookDelivery('retry', 10)
    d.webhookDelivery('parked', 10)
    d.parked(3, 'gave-up')
    d.parked(0, 'invalid')
    expect(await value(m, 'threadline_delivery_events_total', { event_type: 'posts.create' })).toBe(
      2,
    )
    expect(
      await value(m, 'threadline_delivery_events_total', { event_type: 'profile.update' }),
    ).toBe(1)
    for (const outcome of ['delivered', 'retry', 'parked']) {
      expect(await value(m, 'threadline_delivery_webhook_deliveries_total', { outcome })).toBe(1)
    }
    expect(await value(m, 'threadline_delivery_parked_total', { reason: 'gave-up' })).toBe(3)
    expect(await value(m, 'threadline_delivery_parked_total', { reason: 'invalid' })).toBe(0)
  })

  it('samples the queues of the roles a process runs', () => {
    expect(queuesForRoles(['api'])).toEqual([])
    expect(queuesForRoles(['writer'])).toEqual(['posts', 'compliance', 'activity'])
    expect(queuesForRoles(['api', 'ingest', 'writer', 'delivery']).sort()).toEqual([
      'activity',
      'backfill',
      'compliance',
      'posts',
      'webhooks',
    ])
  })

  it('has a dashboard that asks only for series the processes export', async () => {
    const m = createMetrics()
    m.writer()
    m.ingest()
    m.api()
    m.delivery()
    queueMetrics(m.registry)
    const families = new Set<string>()
    for (const f of await m.registry.getMetricsAsJSON()) {
      families.add(f.name)
      if (String(f.type) === 'histogram')
        for (const s of ['_bucket', '_sum', '_count']) families.add(f.name + s)
    }
    const dashboard = JSON.parse(
      readFileSync(new URL('../../../infra/grafana/threadline.json', import.meta.url), 'utf8'),
    ) as { panels: Array<{ targets?: Array<{ expr: string }> }> }
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr))
    expect(exprs.length).toBeGreaterThan(30)
    const used = new Set(
      exprs.flatMap((e) => e.match(/\b(?:threadline|process|nodejs)_\w+/g) ?? []),
    )
    expect([...used].filter((name) => !families.has(name))).toEqual([])
  })
})

describe('compliance metrics', () => {
  it('count applied events by action and give the stream path’s lag', async () => {
    const m = createMetrics({ defaultMetrics: false })
    const w = m.writer()
    expect(await value(m, 'threadline_writer_compliance_events_total', { action: 'delete' })).toBe(
      0,
    )
    expect(await value(m, 'threadline_writer_compliance_stream_lag_seconds')).toBeNaN()
    w.complianceApplied({
      actions: { delete: 3, user_protect: 1 },
      applied: 3,
      repeated: 1,
      newestStreamEventAt: Date.now() - 4_000,
      seconds: 0.01,
    })
    w.complianceApplied({ actions: { delete: 2 }, applied: 2, repeated: 0, seconds: 0.01 })
    expect(await value(m, 'threadline_writer_compliance_events_total', { action: 'delete' })).toBe(
      5,
    )
    expect(await value(m, 'threadline_writer_compliance_repeated_total')).toBe(1)
    const lag = await value(m, 'threadline_writer_compliance_stream_lag_seconds')
    expect(lag).toBeGreaterThanOrEqual(4)
    expect(lag).toBeLessThan(60)
  })

  it('give the age of the last complete sweep, +Inf before the first', async () => {
    const m = createMetrics({ defaultMetrics: false })
    const i = m.ingest()
    const sweep: { lastCompleteAt?: number } = {}
    i.complianceSweep(async () => sweep.lastCompleteAt)
    expect(await value(m, 'threadline_ingest_compliance_sweep_age_seconds')).toBe(Infinity)
    sweep.lastCompleteAt = Date.now() - 3_600_000
    const age = await value(m, 'threadline_ingest_compliance_sweep_age_seconds')
    expect(age).toBeGreaterThanOrEqual(3_600)
    expect(age).toBeLessThan(3_660)
    i.complianceStreamEvent({ type: 'connected' })
    i.complianceStreamEvent({
      type: 'disconnected',
      reason: 'stream ended',
      failure: { kind: 'network' },
    })
    expect(await value(m, 'threadline_ingest_compliance_stream_connects_total')).toBe(1)
    expect(
      await value(m, 'threadline_ingest_compliance_reconnects_total', { cause: 'ended' }),
    ).toBe(1)
    expect(await value(m, 'threadline_ingest_reconnects_total', { cause: 'ended' })).toBeUndefined()
    i.complianceJobEnded('expired')
    expect(await value(m, 'threadline_ingest_compliance_jobs_total', { end: 'expired' })).toBe(1)
  })
})
