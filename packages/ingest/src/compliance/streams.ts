import { complianceEventFromStream, type ComplianceEvent } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { IngestMetrics } from '@threadline/metrics'
import { Batcher, type HandedOn } from '../batcher.js'
import { ComplianceProducer } from '../jobs/queue-compliance.js'
import { StreamReader, type StreamRecovery, type StreamSource } from '../stream-reader.js'
import type { StreamResponse, UpstreamClient } from '../upstream.js'
import type { ComplianceMarks } from './marks.js'
import type { IngestOptions } from '../options.js'

/** X splits each compliance stream in four partitions, each its own connection. */
const PARTITIONS = [1, 2, 3, 4] as const
/** What a reconnect asks to replay when the gap fits in it (X's most). */
const BACKFILL_MINUTES = 5
/** A longer gap replays from the mark less this, for events still in flight when it was taken. */
const START_MARGIN_MS = 60_000
/** X's compliance streams reach back this far with start_time. */
const START_REACH_MS = 5 * 86_400_000

/** A line of one partition, with when it reached the ingest. */
interface ComplianceLine {
  line: Buffer
  stream: string
  receivedAt: string
  length: number
}

export interface ComplianceStreamsDeps {
  upstream: UpstreamClient
  producer: ComplianceProducer
  marks: ComplianceMarks
  /** Settles once the `compliance` job `id` was applied (or failed), for group commit. */
  done: (id: string) => Promise<void>
  logger: Logger
  metrics?: IngestMetrics
  options: IngestOptions
}

/**
 * One partition of one compliance stream, as a StreamReader sees it: where to open it, and what to
 * replay after a gap (the filtered stream's rules: `backfill_minutes` when the gap fits in it,
 * `start_time` from the mark for a longer one).
 */
export class CompliancePartition implements StreamSource, StreamRecovery {
  readonly hasToken: boolean
  private startTime: string | undefined
  private connections = 0
  private refused = false

  constructor(
    readonly name: string,
    private readonly kind: 'tweet' | 'user',
    private readonly partition: number,
    private readonly deps: {
      upstream: UpstreamClient
      marks: Pick<ComplianceMarks, 'read'>
      logger: Logger
    },
    private readonly ledSince: number,
  ) {
    this.hasToken = deps.upstream.hasToken
  }

  async plan(): Promise<number> {
    this.connections++
    let mark: number | undefined
    try {
      mark = await this.deps.marks.read(this.name)
    } catch (err) {
      this.deps.logger.warn({ err, stream: this.name }, 'could not read the compliance mark')
    }
    this.startTime = undefined
    // The first connection of a store that never read this stream starts live.
    if (mark === undefined && this.connections === 1) return 0
    const from = mark ?? this.ledSince
    const now = Date.now()
    if (!this.refused && now - from + START_MARGIN_MS <= BACKFILL_MINUTES * 60_000) {
      return BACKFILL_MINUTES
    }
    this.startTime = new Date(Math.max(from - START_MARGIN_MS, now - START_REACH_MS)).toISOString()
    return 0
  }

  refusedBackfill(): void {
    this.refused = true
  }

  async connected(): Promise<void> {}

  /** The `start_time` the next connection asks for, if any (after plan). */
  get replayFrom(): string | undefined {
    return this.startTime
  }

  openStream(backfillMinutes: number, signal: AbortSignal): Promise<StreamResponse> {
    return this.deps.upstream.openComplianceStream(
      this.kind,
      this.partition,
      { backfillMinutes, ...(this.startTime ? { startTime: this.startTime } : {}) },
      signal,
    )
  }
}

/**
 * `UPSTREAM_COMPLIANCE=stream`: both compliance streams on partitions 1–4 (eight connections),
 * each held by a StreamReader with the filtered stream's reconnect and backoff rules. Lines of all
 * eight gather into `compliance` jobs (group commit, like the stream's `posts` batches); each
 * partition's mark moves once its events are queued.
 */
export class ComplianceStreams {
  private readonly readers: StreamReader[] = []
  private readonly batcher: Batcher<ComplianceLine>
  private readonly log: Logger

  constructor(private readonly deps: ComplianceStreamsDeps) {
    this.log = deps.logger.child({ component: 'compliance-stream' })
    this.batcher = new Batcher<ComplianceLine>(
      (lines, _observedAt, batch) => this.hand(lines, batch.id),
      { maxItems: 1_000, maxInFlight: 2 },
      deps.logger,
    )
    const ledSince = Date.now()
    for (const kind of ['tweet', 'user'] as const) {
      for (const partition of PARTITIONS) {
        const source = new CompliancePartition(
          `${kind}-${partition}`,
          kind,
          partition,
          deps,
          ledSince,
        )
        const reader = new StreamReader({
          upstream: source,
          recovery: source,
          sink: (line) =>
            this.batcher.add({
              line,
              stream: source.name,
              receivedAt: new Date().toISOString(),
              length: 1,
            }),
          // The reader names its component itself; the partition tells its lines apart.
          logger: deps.logger.child({ stream: `compliance-${source.name}` }),
          options: {
            policy: deps.options.backoff,
            stallMs: deps.options.stallMs,
            backfillMinutes: BACKFILL_MINUTES,
            noRulesRetryMs: deps.options.noRulesRetryMs,
          },
        })
        reader.onEvent((e) => deps.metrics?.complianceStreamEvent(e))
        this.readers.push(reader)
      }
    }
  }

  /** Lines → events → `compliance` jobs; then each partition's mark. */
  private async hand(lines: ComplianceLine[], batchId: string): Promise<HandedOn | void> {
    const events: ComplianceEvent[] = []
    const newest = new Map<string, number>()
    for (const { line, stream, receivedAt } of lines) {
      let body: unknown
      try {
        body = JSON.parse(line.toString('utf8'))
      } catch {
        body = undefined
      }
      const event =
        body === undefined ? { error: 'not JSON' } : complianceEventFromStream(body, receivedAt)
      if ('error' in event) {
        this.deps.metrics?.complianceUnreadable()
        this.log.warn(
          { stream, error: event.error, line: line.toString('utf8').slice(0, 500) },
          'unreadable compliance line',
        )
        continue
      }
      events.push(event)
      const at = Date.parse(event.eventAt)
      if (at > (newest.get(stream) ?? -Infinity)) newest.set(stream, at)
    }
    if (events.length === 0) return
    // Asked before the add, so that a quick writer's event is not missed.
    const ids = ComplianceProducer.jobIds(events.length, batchId)
    const done = Promise.all(ids.map((id) => this.deps.done(id))).then(() => {})
    await this.deps.producer.add(events, batchId)
    for (const [stream, at] of newest) await this.deps.marks.advance(stream, at)
    return { done }
  }

  start(): void {
    for (const reader of this.readers) reader.start()
  }

  async close(deadlineMs: number): Promise<void> {
    const closed = Promise.all(this.readers.map((r) => r.close()))
    await this.batcher.close(deadlineMs)
    await closed
    await this.batcher.close(deadlineMs)
  }
}
