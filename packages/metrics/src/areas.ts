import { Counter, Gauge, Histogram, type Registry } from 'prom-client'

/**
 * The metrics of each area, as recorders with plain methods: services count and time what they do
 * without touching prom-client. Every label takes values from a small fixed set (no ids, no URLs).
 */

/** Seconds, from 1 ms to 30 s: a batch transaction, an HTTP request, a webhook POST. */
const LATENCY_BUCKETS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
/** Lines per `posts` job: one backfill page … POSTS_BATCH_MAX_LINES. */
const BATCH_BUCKETS = [1, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000]

export interface WriterBatch {
  lines: number
  inserted: number
  updated: number
  users: number
  rejects: number
  /** The batch's store transaction(s), publishing excluded. */
  seconds: number
}

export interface WriterMetrics {
  /** A `posts` job stored (what storeLines returned). */
  batchStored(batch: WriterBatch): void
  /** A job whose payload could not be read (kept as one reject, not retried). */
  batchInvalid(): void
  /** A job attempt that threw (BullMQ retries it). */
  batchFailed(): void
  /** Publishing after commit failed; the outbox relay will publish instead. */
  publishFailed(): void
  /** Outbox rows the relay published (a writer died or its fast path failed). */
  relayed(rows: number): void
  /**
   * A `compliance` job applied: its events by action, how many changed something, and the newest
   * `event_at` (epoch ms) of those that came by the compliance streams (the stream path's lag).
   */
  complianceApplied(batch: {
    actions: Record<string, number>
    applied: number
    repeated: number
    newestStreamEventAt?: number
    seconds: number
  }): void
}

export function writerMetrics(registry: Registry): WriterMetrics {
  const registers = [registry]
  const posts = new Counter({
    name: 'threadline_writer_posts_stored_total',
    help: 'Posts written to Postgres: new rows (inserted) and newer copies replacing a row (updated)',
    labelNames: ['result'] as const,
    registers,
  })
  const users = new Counter({
    name: 'threadline_writer_users_stored_total',
    help: 'Users inserted or updated',
    registers,
  })
  const rejects = new Counter({
    name: 'threadline_writer_rejects_total',
    help: 'Lines kept in ingest_rejects (malformed, or refused by Postgres)',
    registers,
  })
  const batches = new Counter({
    name: 'threadline_writer_batches_total',
    help: 'posts jobs by outcome: stored, invalid (payload unreadable, kept as a reject), failed (retried)',
    labelNames: ['outcome'] as const,
    registers,
  })
  const lines = new Histogram({
    name: 'threadline_writer_batch_lines',
    help: 'Lines per stored posts job',
    buckets: BATCH_BUCKETS,
    registers,
  })
  const duration = new Histogram({
    name: 'threadline_writer_store_duration_seconds',
    help: 'Time to store one posts job in Postgres (its transaction), publishing excluded',
    buckets: LATENCY_BUCKETS,
    registers,
  })
  const publishFailures = new Counter({
    name: 'threadline_writer_publish_failures_total',
    help: 'Publishes after commit that failed (the outbox relay publishes those rows later)',
    registers,
  })
  const relayed = new Counter({
    name: 'threadline_writer_relayed_total',
    help: 'Outbox rows published by the relay rather than by the writer that stored them',
    registers,
  })
  const complianceEvents = new Counter({
    name: 'threadline_writer_compliance_events_total',
    help: 'Compliance events applied, by action (delete, user_protect, …)',
    labelNames: ['action'] as const,
    registers,
  })
  const complianceRepeated = new Counter({
    name: 'threadline_writer_compliance_repeated_total',
    help: 'Compliance events that were already applied (a replay, a second sweep): nothing changed',
    registers,
  })
  const complianceDuration = new Histogram({
    name: 'threadline_writer_compliance_apply_duration_seconds',
    help: 'Time to apply one compliance job in Postgres',
    buckets: LATENCY_BUCKETS,
    registers,
  })
  let newestStreamEvent: number | undefined
  new Gauge({
    name: 'threadline_writer_compliance_stream_lag_seconds',
    help: 'Now less the newest event_at applied from the compliance streams (NaN until one is)',
    registers,
    collect() {
      this.set(
        newestStreamEvent === undefined
          ? NaN
          : Math.max(0, (Date.now() - newestStreamEvent) / 1000),
      )
    },
  })
  for (const action of ['delete', 'user_protect', 'user_suspend', 'user_delete']) {
    complianceEvents.inc({ action }, 0)
  }
  // Present at zero from the start, so rate() and alerts see a series before the first event.
  posts.inc({ result: 'inserted' }, 0)
  posts.inc({ result: 'updated' }, 0)
  for (const outcome of ['stored', 'invalid', 'failed']) batches.inc({ outcome }, 0)
  return {
    batchStored(b) {
      posts.inc({ result: 'inserted' }, b.inserted)
      posts.inc({ result: 'updated' }, b.updated)
      users.inc(b.users)
      rejects.inc(b.rejects)
      batches.inc({ outcome: 'stored' })
      lines.observe(b.lines)
      duration.observe(b.seconds)
    },
    batchInvalid() {
      batches.inc({ outcome: 'invalid' })
      rejects.inc()
    },
    batchFailed: () => batches.inc({ outcome: 'failed' }),
    publishFailed: () => publishFailures.inc(),
    relayed: (rows) => relayed.inc(rows),
    complianceApplied(b) {
      for (const [action, n] of Object.entries(b.actions)) complianceEvents.inc({ action }, n)
      complianceRepeated.inc(b.repeated)
      complianceDuration.observe(b.seconds)
      if (b.newestStreamEventAt !== undefined && b.newestStreamEventAt > (newestStreamEvent ?? 0)) {
        newestStreamEvent = b.newestStreamEventAt
      }
    },
  }
}

/** The ingest's stream events, structurally (a package never imports a service). */
export type IngestStreamEvent =
  | { type: 'connected' }
  | { type: 'disconnected'; reason: string; failure?: { kind: string } }
  | { type: 'error-line' }

export type ReconnectCause =
  'network' | 'stall' | 'ended' | 'operational-disconnect' | 'http' | 'rate-limit' | 'no-rules'

/** Why the stream reconnected, from the reader's event: a fixed set, never the reason's text. */
export function reconnectCause(e: { reason: string; failure?: { kind: string } }): ReconnectCause {
  const kind = e.failure?.kind
  if (kind === undefined) return 'no-rules'
  if (kind === 'http') return 'http'
  if (kind === 'rate-limit') return 'rate-limit'
  if (e.reason.startsWith('silent for') || e.reason.startsWith('no response headers')) {
    return 'stall'
  }
  if (e.reason.startsWith('operational disconnect')) return 'operational-disconnect'
  if (e.reason === 'stream ended') return 'ended'
  return 'network'
}

export interface IngestMetrics extends ComplianceIngestMetrics {
  /** Feed every StreamReader event here. */
  streamEvent(e: IngestStreamEvent): void
  /** A Post line read from the upstream stream (keep-alives and error notices excluded). */
  streamLine(): void
  /** A backfill search page or root lookup handed on to the queue. */
  backfillPage(): void
  /** A posts job added to the queue. */
  batchQueued(source: string, lines: number): void
  /** Reports whether this replica holds the leader lease (read at scrape time). */
  leader(held: () => boolean): void
  /** Reports whether adding jobs is paused for a nearly full Redis (read at scrape time). */
  redisPaused(paused: () => boolean): void
  /** A window the stream missed, recovered by a replay or by search: Posts found, seconds to close. */
  windowRecovered(how: 'backfill_minutes' | 'search', posts: number, closeSeconds: number): void
}

/** The ingest's compliance side: events queued, its streams, and the sweep through batch jobs. */
export interface ComplianceIngestMetrics {
  /** Compliance events queued for the writer, by source (stream, job). */
  complianceQueued(source: string, events: number): void
  /** Feed every compliance stream reader's events here (connections and reconnects by cause). */
  complianceStreamEvent(e: IngestStreamEvent): void
  /** A compliance stream line or job result line that is not an event the ingest can read. */
  complianceUnreadable(): void
  /** A batch compliance job of a sweep ended: complete, or failed, expired, timeout (retried next sweep). */
  complianceJobEnded(end: 'complete' | 'failed' | 'expired' | 'timeout'): void
  /** When the last sweep all of whose jobs completed ended (epoch ms), read at scrape time. */
  complianceSweep(lastCompleteAt: () => Promise<number | undefined>): void
}

export function ingestMetrics(registry: Registry): IngestMetrics {
  const registers = [registry]
  const connects = new Counter({
    name: 'threadline_ingest_stream_connects_total',
    help: 'Successful connections to the upstream filtered stream',
    registers,
  })
  const reconnects = new Counter({
    name: 'threadline_ingest_reconnects_total',
    help: 'Upstream stream disconnections followed by a reconnect, by cause',
    labelNames: ['cause'] as const,
    registers,
  })
  const lines = new Counter({
    name: 'threadline_ingest_stream_lines_total',
    help: 'Post lines read from the upstream stream',
    registers,
  })
  const errorLines = new Counter({
    name: 'threadline_ingest_stream_error_lines_total',
    help: 'Error notices the upstream sent on the stream',
    registers,
  })
  const pages = new Counter({
    name: 'threadline_ingest_backfill_pages_total',
    help: 'Backfill search pages (and root lookups) handed on to the posts queue',
    registers,
  })
  const batches = new Counter({
    name: 'threadline_ingest_batches_queued_total',
    help: 'posts jobs added, by source (stream, backfill)',
    labelNames: ['source'] as const,
    registers,
  })
  const batchLines = new Counter({
    name: 'threadline_ingest_lines_queued_total',
    help: 'Lines in the posts jobs added, by source',
    labelNames: ['source'] as const,
    registers,
  })
  const windows = new Counter({
    name: 'threadline_ingest_windows_recovered_total',
    help: 'Stream windows (reconnect, outage, takeover) recovered, by how (backfill_minutes, search)',
    labelNames: ['how'] as const,
    registers,
  })
  const recoveredPosts = new Counter({
    name: 'threadline_ingest_recovered_posts_total',
    help: 'Posts found by the searches that recovered stream windows',
    registers,
  })
  const closeSeconds = new Histogram({
    name: 'threadline_ingest_window_close_seconds',
    help: 'From the stream coming back to its missed window searched to the end',
    buckets: [1, 5, 15, 30, 60, 120, 300, 900],
    registers,
  })
  let isLeader: (() => boolean) | undefined
  new Gauge({
    name: 'threadline_ingest_leader',
    help: '1 when this replica holds the leader lease (runs rule sync and the stream)',
    registers,
    collect() {
      this.set(isLeader?.() ? 1 : 0)
    },
  })
  const compliance = complianceIngestMetrics(registry)
  let isPaused: (() => boolean) | undefined
  new Gauge({
    name: 'threadline_ingest_redis_paused',
    help: '1 while this replica holds its jobs because Redis is nearly full (maxmemory)',
    registers,
    collect() {
      this.set(isPaused?.() ? 1 : 0)
    },
  })
  const cause = (source: string) => (source === 'stream' ? 'stream' : 'backfill')
  return {
    ...compliance,
    streamEvent(e) {
      if (e.type === 'connected') connects.inc()
      else if (e.type === 'error-line') errorLines.inc()
      else reconnects.inc({ cause: reconnectCause(e) })
    },
    windowRecovered(how, posts, seconds) {
      windows.inc({ how })
      recoveredPosts.inc(posts)
      if (how === 'search') closeSeconds.observe(seconds)
    },
    streamLine: () => lines.inc(),
    backfillPage: () => pages.inc(),
    batchQueued(source, n) {
      batches.inc({ source: cause(source) })
      batchLines.inc({ source: cause(source) }, n)
    },
    leader(held) {
      isLeader = held
    },
    redisPaused(paused) {
      isPaused = paused
    },
  }
}

export function complianceIngestMetrics(registry: Registry): ComplianceIngestMetrics {
  const registers = [registry]
  const queued = new Counter({
    name: 'threadline_ingest_compliance_events_queued_total',
    help: 'Compliance events queued for the writer, by source (stream, job)',
    labelNames: ['source'] as const,
    registers,
  })
  const connects = new Counter({
    name: 'threadline_ingest_compliance_stream_connects_total',
    help: 'Successful connections to a partition of the upstream compliance streams',
    registers,
  })
  const reconnects = new Counter({
    name: 'threadline_ingest_compliance_reconnects_total',
    help: 'Compliance stream disconnections followed by a reconnect, by cause',
    labelNames: ['cause'] as const,
    registers,
  })
  const unreadable = new Counter({
    name: 'threadline_ingest_compliance_unreadable_total',
    help: 'Compliance stream lines or job result lines that were not a readable event',
    registers,
  })
  const jobs = new Counter({
    name: 'threadline_ingest_compliance_jobs_total',
    help: 'Batch compliance jobs of the sweep by how they ended (failed, expired, timeout: retried next sweep)',
    labelNames: ['end'] as const,
    registers,
  })
  let lastSweep: (() => Promise<number | undefined>) | undefined
  new Gauge({
    name: 'threadline_ingest_compliance_sweep_age_seconds',
    help: 'Seconds since the last compliance sweep all of whose jobs completed (+Inf: none yet)',
    registers,
    async collect() {
      if (!lastSweep) return
      const at = await lastSweep().catch(() => undefined)
      this.set(at === undefined ? Infinity : Math.max(0, (Date.now() - at) / 1000))
    },
  })
  for (const source of ['stream', 'job']) queued.inc({ source }, 0)
  for (const end of ['complete', 'failed', 'expired', 'timeout']) jobs.inc({ end }, 0)
  return {
    complianceQueued: (source, n) =>
      queued.inc({ source: source === 'stream' ? 'stream' : 'job' }, n),
    complianceStreamEvent(e) {
      if (e.type === 'connected') connects.inc()
      else if (e.type === 'disconnected') reconnects.inc({ cause: reconnectCause(e) })
      else unreadable.inc()
    },
    complianceUnreadable: () => unreadable.inc(),
    complianceJobEnded: (end) => jobs.inc({ end }),
    complianceSweep(fn) {
      lastSweep = fn
    },
  }
}

export interface HttpRequest {
  method: string
  /** The route's pattern (`/2/tweets/:id`), `unmatched` when none: never the raw URL. */
  route: string
  status: number
  seconds: number
  /** A long-lived stream: counted, but kept out of the latency histogram. */
  stream: boolean
}

export interface ApiMetrics {
  request(r: HttpRequest): void
  /** Registers how to count the open connections of a stream kind (read at scrape time). */
  streamConnections(stream: string, count: () => number): void
  /** Registers how to read the bearer-token lookups made so far (read at scrape time). */
  tokenLookups(read: () => { queries: number; tokens: number }): void
}

const METHODS = new Set(['GET', 'POST', 'PUT', 'DELETE', 'HEAD', 'OPTIONS', 'PATCH'])

export function apiMetrics(registry: Registry): ApiMetrics {
  const registers = [registry]
  const requests = new Counter({
    name: 'threadline_http_requests_total',
    help: 'HTTP requests answered, by method, route pattern and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers,
  })
  const duration = new Histogram({
    name: 'threadline_http_request_duration_seconds',
    help: 'HTTP request latency by method, route pattern and status (streams excluded)',
    labelNames: ['method', 'route', 'status'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  })
  const sources = new Map<string, () => number>()
  new Gauge({
    name: 'threadline_api_stream_connections',
    help: 'Open stream connections (filtered stream, activity stream)',
    labelNames: ['stream'] as const,
    registers,
    collect() {
      for (const [stream, count] of sources) this.set({ stream }, count())
    },
  })
  let lookups = () => ({ queries: 0, tokens: 0 })
  new Counter({
    name: 'threadline_api_token_lookup_queries_total',
    help: 'Database queries looking up bearer tokens not cached (bounded per second)',
    registers,
    collect() {
      this.reset()
      this.inc(lookups().queries)
    },
  })
  new Counter({
    name: 'threadline_api_token_lookups_total',
    help: 'Bearer tokens looked up in the database (several per query under load)',
    registers,
    collect() {
      this.reset()
      this.inc(lookups().tokens)
    },
  })
  return {
    request(r) {
      const labels = {
        method: METHODS.has(r.method) ? r.method : 'OTHER',
        route: r.route,
        status: String(r.status),
      }
      requests.inc(labels)
      if (!r.stream) duration.observe(labels, r.seconds)
    },
    streamConnections(stream, count) {
      sources.set(stream, count)
    },
    tokenLookups(read) {
      lookups = read
    },
  }
}

export type DeliveryOutcome = 'delivered' | 'retry' | 'parked'
export type ParkReason = 'gave-up' | 'refused' | 'invalid'

export interface DeliveryMetrics {
  /** Events recorded for subscriptions by one activity job (after deduplication). */
  eventsDerived(eventTypes: readonly string[]): void
  /** One webhook POST and what came of it (`parked`: it failed and its events were parked). */
  webhookDelivery(outcome: DeliveryOutcome, seconds: number): void
  /** Events moved to webhook_failures. */
  parked(events: number, reason: ParkReason): void
}

export function deliveryMetrics(registry: Registry): DeliveryMetrics {
  const registers = [registry]
  const events = new Counter({
    name: 'threadline_delivery_events_total',
    help: 'Activity events derived for subscriptions, by event type',
    labelNames: ['event_type'] as const,
    registers,
  })
  const deliveries = new Counter({
    name: 'threadline_delivery_webhook_deliveries_total',
    help: 'Webhook POSTs by outcome: delivered, retry (failed, tried again later), parked (failed for good)',
    labelNames: ['outcome'] as const,
    registers,
  })
  const duration = new Histogram({
    name: 'threadline_delivery_webhook_duration_seconds',
    help: 'Webhook POST latency, failures included',
    labelNames: ['outcome'] as const,
    buckets: LATENCY_BUCKETS,
    registers,
  })
  const parked = new Counter({
    name: 'threadline_delivery_parked_total',
    help: 'Events parked in webhook_failures, by reason (gave-up after the attempts, refused address, invalid webhook)',
    labelNames: ['reason'] as const,
    registers,
  })
  for (const outcome of ['delivered', 'retry', 'parked']) deliveries.inc({ outcome }, 0)
  for (const reason of ['gave-up', 'refused', 'invalid']) parked.inc({ reason }, 0)
  return {
    eventsDerived(types) {
      const byType = new Map<string, number>()
      for (const t of types) byType.set(t, (byType.get(t) ?? 0) + 1)
      for (const [eventType, n] of byType) events.inc({ event_type: eventType }, n)
    },
    webhookDelivery(outcome, seconds) {
      deliveries.inc({ outcome })
      duration.observe({ outcome }, seconds)
    },
    parked(n, reason) {
      if (n > 0) parked.inc({ reason }, n)
    },
  }
}
