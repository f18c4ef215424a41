import { abortableSleep } from '@threadline/runtime'
import type { Logger } from '@threadline/logger'
import {
  INITIAL_BACKOFF,
  nextBackoff,
  type BackoffPolicy,
  type BackoffState,
  type ConnectFailure,
} from './backoff.js'
import { LineSplitter } from './lines.js'
import { authHint, parseRateLimit, type StreamResponse, type UpstreamClient } from './upstream.js'

export interface StreamReaderOptions {
  policy: BackoffPolicy
  /** No byte for this long → reconnect. */
  stallMs: number
  /** Asked for on every reconnect (not the first connection) when above 0 and no `recovery` plans. */
  backfillMinutes: number
  /** After a 409 (no rules), wait at most this long for a rule change before trying again. */
  noRulesRetryMs: number
}

/** What a reader opens: the filtered stream, or a partition of a compliance stream. */
export type StreamSource = Pick<UpstreamClient, 'openStream' | 'hasToken'>

export interface StreamReaderDeps {
  upstream: StreamSource
  /** Takes one raw line, as the upstream's bytes; awaiting it is the backpressure. */
  sink: (line: Buffer) => Promise<void>
  logger: Logger
  options: StreamReaderOptions
  /** Resolves when the rule set may have changed (after a 409), or when `signal` aborts. */
  waitForRules?: (signal: AbortSignal) => Promise<void>
  /** Plans `backfill_minutes` and recovers the window of every connection (see WindowRecovery). */
  recovery?: StreamRecovery
}

/** What the reader asks of recovery around each connection. */
export interface StreamRecovery {
  /** The `backfill_minutes` to ask for on the next connection; never rejects. */
  plan(): Promise<number>
  /** The upstream refused the `backfill_minutes` asked for. */
  refusedBackfill(): void
  /** Awaited after a 200 and before the first line is read. */
  connected(backfillMinutes: number, signal: AbortSignal): Promise<void>
}

/** What happened to the stream, for logs, metrics and tests. */
export type StreamEvent =
  | { type: 'connected'; attempt: number; backfillMinutes: number }
  | { type: 'disconnected'; reason: string; failure?: ConnectFailure; delayMs: number }
  | { type: 'error-line'; line: string }

export interface StreamStats {
  connects: number
  lines: number
  keepAlives: number
  errorLines: number
  lastEvent?: StreamEvent
}

type Outcome =
  | { failure: ConnectFailure; reason: string; connected: boolean }
  | { noRules: true; reason: string }
  | { refusedBackfill: true; status: number; reason: string }
  | { closed: true }

const DATA_FIRST = Buffer.from('{"data"')

/** A line is an error notice (not a Post) when it holds `errors` and no `data`. */
function errorNotice(line: Buffer): Record<string, unknown>[] | undefined {
  // Fast path: Post lines start with their `data` member (and are not decoded here).
  const n = DATA_FIRST.length
  if (line.length >= n && DATA_FIRST.compare(line, 0, n) === 0) return undefined
  let parsed: unknown
  try {
    parsed = JSON.parse(line.toString('utf8'))
  } catch {
    return undefined // malformed: handed on, the writer keeps it as a reject
  }
  if (typeof parsed !== 'object' || parsed === null || 'data' in parsed) return undefined
  const errors = (parsed as { errors?: unknown }).errors
  if (!Array.isArray(errors)) return undefined
  return errors.filter((e): e is Record<string, unknown> => typeof e === 'object' && e !== null)
}

const isDisconnect = (e: Record<string, unknown>) =>
  /operational-disconnect/.test(String(e.type ?? '')) ||
  /operational-disconnect/i.test(String(e.title ?? '')) ||
  e.disconnect_type !== undefined

/**
 * Holds one connection to the upstream filtered stream and reconnects as X advises. Lines go to
 * the sink as received; blank lines are keep-alives; error notices are logged, and an operational
 * disconnect ends the connection (then a reconnect).
 */
export class StreamReader {
  readonly stats: StreamStats = { connects: 0, lines: 0, keepAlives: 0, errorLines: 0 }
  private readonly abort = new AbortController()
  private readonly log: Logger
  private running: Promise<void> | undefined
  private readonly listeners = new Set<(e: StreamEvent) => void>()

  constructor(private readonly deps: StreamReaderDeps) {
    this.log = deps.logger.child({ component: 'stream' })
  }

  onEvent(fn: (e: StreamEvent) => void): () => void {
    this.listeners.add(fn)
    return () => this.listeners.delete(fn)
  }

  private emit(e: StreamEvent): void {
    this.stats.lastEvent = e
    for (const fn of this.listeners) fn(e)
  }

  start(): void {
    this.running ??= this.loop().catch((err: unknown) => {
      this.log.fatal({ err }, 'stream loop failed')
    })
  }

  async close(): Promise<void> {
    this.abort.abort()
    await this.running
  }

  private async loop(): Promise<void> {
    const signal = this.abort.signal
    const { options } = this.deps
    let state: BackoffState = INITIAL_BACKOFF
    let attempt = 0
    while (!signal.aborted) {
      attempt += 1
      const { recovery } = this.deps
      const backfillMinutes = recovery
        ? await recovery.plan()
        : attempt > 1
          ? options.backfillMinutes
          : 0
      const outcome = await this.connectOnce(attempt, backfillMinutes)
      if ('closed' in outcome) break
      if ('refusedBackfill' in outcome) {
        // Not a failure of the stream: the next attempt goes at once, without the parameter.
        recovery?.refusedBackfill()
        const failure = { kind: 'http' as const, status: outcome.status }
        this.emit({ type: 'disconnected', reason: outcome.reason, failure, delayMs: 0 })
        continue
      }
      if ('noRules' in outcome) {
        this.log.info('upstream has no rules yet; waiting for one')
        this.emit({ type: 'disconnected', reason: outcome.reason, delayMs: options.noRulesRetryMs })
        const wait = new AbortController()
        const both = AbortSignal.any([signal, wait.signal])
        await Promise.race([
          abortableSleep(options.noRulesRetryMs, both),
          this.deps.waitForRules?.(both) ?? new Promise(() => {}),
        ])
        wait.abort()
        continue
      }
      // A connection that delivered counts as good: the backoff starts over.
      if (outcome.connected) state = INITIAL_BACKOFF
      const next = nextBackoff(state, outcome.failure, options.policy, Date.now())
      state = next.state
      this.log.warn(
        { reason: outcome.reason, delayMs: next.delayMs, attempt },
        'stream disconnected; reconnecting',
      )
      this.emit({
        type: 'disconnected',
        reason: outcome.reason,
        failure: outcome.failure,
        delayMs: next.delayMs,
      })
      await abortableSleep(next.delayMs, signal)
    }
  }

  /** What a connection answered with another status than 200 means for the next attempt. */
  private async refused(res: StreamResponse, backfillMinutes: number): Promise<Outcome> {
    const connected = false
    const body = await res.text().catch(() => '')
    if (res.status === 409) return { noRules: true, reason: `409: ${body.slice(0, 200)}` }
    if (backfillMinutes > 0 && refusesBackfill(res.status, body)) {
      const reason = `${res.status}: ${body.slice(0, 200)}`
      return { refusedBackfill: true, status: res.status, reason }
    }
    if (res.status === 429) {
      return {
        failure: { kind: 'rate-limit', resetAt: parseRateLimit(res.headers).resetAt },
        reason: `429: ${body.slice(0, 200)}`,
        connected,
      }
    }
    return {
      failure: { kind: 'http', status: res.status },
      reason: `${res.status}: ${body.slice(0, 200)}${authHint(res.status, this.deps.upstream.hasToken)}`,
      connected,
    }
  }

  private async connectOnce(attempt: number, backfillMinutes: number): Promise<Outcome> {
    const closing = this.abort.signal
    const conn = new AbortController()
    const signal = AbortSignal.any([closing, conn.signal])
    const { stallMs } = this.deps.options
    let lastByteAt = Date.now()
    let inSink = false
    let stalled = false
    // Silence is judged only while we are reading: time blocked on the queue is not the upstream's.
    const watchdog = setInterval(
      () => {
        if (!inSink && Date.now() - lastByteAt > stallMs) {
          stalled = true
          conn.abort()
        }
      },
      Math.max(10, Math.floor(stallMs / 4)),
    )
    let connected = false
    try {
      let res: StreamResponse
      try {
        res = await this.deps.upstream.openStream(backfillMinutes, signal)
      } catch (err) {
        if (closing.aborted) return { closed: true }
        const reason = stalled ? 'no response headers in time' : `network: ${errText(err)}`
        return { failure: { kind: 'network' }, reason, connected }
      }
      if (res.status !== 200) return await this.refused(res, backfillMinutes)
      connected = true
      this.stats.connects += 1
      this.log.info({ attempt, backfillMinutes }, 'stream connected')
      this.emit({ type: 'connected', attempt, backfillMinutes })
      if (this.deps.recovery) {
        // Time spent recording the window (Redis full or away) is not the upstream's silence.
        inSink = true
        try {
          await this.deps.recovery.connected(backfillMinutes, signal)
        } finally {
          inSink = false
        }
        if (closing.aborted) return { closed: true }
      }
      lastByteAt = Date.now()
      const splitter = new LineSplitter()
      try {
        for await (const chunk of res.body) {
          lastByteAt = Date.now()
          for (const line of splitter.push(chunk)) {
            if (line.length === 0) {
              this.stats.keepAlives += 1
              continue
            }
            const errors = errorNotice(line)
            if (errors) {
              this.stats.errorLines += 1
              this.log.warn({ errors }, 'upstream sent errors on the stream')
              this.emit({ type: 'error-line', line: line.toString('utf8') })
              if (errors.some(isDisconnect)) {
                conn.abort()
                return {
                  failure: { kind: 'network' },
                  reason: `operational disconnect: ${String(errors[0]?.disconnect_type ?? errors[0]?.detail ?? '')}`,
                  connected,
                }
              }
              continue
            }
            this.stats.lines += 1
            inSink = true
            try {
              await this.deps.sink(line)
            } finally {
              inSink = false
              lastByteAt = Date.now()
            }
            if (signal.aborted) break
          }
        }
      } catch (err) {
        if (closing.aborted) return { closed: true }
        if (stalled) {
          return {
            failure: { kind: 'network' },
            reason: `silent for more than ${stallMs} ms`,
            connected,
          }
        }
        return { failure: { kind: 'network' }, reason: `network: ${errText(err)}`, connected }
      }
      if (closing.aborted) return { closed: true }
      // A cut mid-line leaves a partial line: dropped (the line's Post comes again on backfill).
      const tail = splitter.end()
      if (tail) this.log.warn({ bytes: tail.length }, 'stream ended mid-line')
      return {
        failure: { kind: 'network' },
        reason: stalled ? `silent for more than ${stallMs} ms` : 'stream ended',
        connected,
      }
    } finally {
      clearInterval(watchdog)
      conn.abort()
    }
  }
}

/**
 * An answer that refuses the `backfill_minutes` parameter itself (X answers so to an access level
 * without it), as opposed to any other refusal of the connection.
 */
function refusesBackfill(status: number, body: string): boolean {
  return (status === 400 || status === 403) && body.includes('backfill_minutes')
}

function errText(err: unknown): string {
  const e = err as { message?: string; cause?: { message?: string; code?: string } }
  return [e.message, e.cause?.code ?? e.cause?.message].filter(Boolean).join(': ')
}
