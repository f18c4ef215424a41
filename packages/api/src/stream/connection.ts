import type { ServerResponse } from 'node:http'
import type { FastifyReply } from 'fastify'
import type { Logger } from '@threadline/logger'
import type { ConnectionSlots } from '@threadline/redis'
import { ApiError, PROBLEM_BASE } from '../errors.js'

/**
 * Long-lived NDJSON responses with X's streaming framing (docs/api.md §3.3), shared by the filtered
 * stream and the activity stream: headers flushed at once, one JSON object per message followed by
 * `\r\n`, a bare `\r\n` keep-alive after a quiet interval, slow readers cut off once their send
 * buffer passes a bound, and an operational-disconnect line for every stream on shutdown.
 *
 * Usage, in a route handler (before anything is written):
 *
 *   const conn = await registry.open(reply, appId)   // throws ApiError 429 past the app's limit
 *   conn.onClose(() => …)                            // client gone, cut off, or shut down
 *   conn.send({ data: … })                           // false once the connection is closed
 *
 * and in the server: `app.addHook('preClose', () => registry.closeAll())`.
 */

export type DisconnectType = 'OperationalDisconnect' | 'SlowReader' | 'ConnectionPurged'

/** How long a buffer over the bound may take to drain before its reader counts as slow. */
const SLOW_READER_GRACE_MS = 2_000
/** Past this many times the bound a reader is cut off at once: memory stays bounded meanwhile. */
const HARD_BOUND_FACTOR = 4

const DISCONNECT_DETAIL: Record<DisconnectType, string> = {
  OperationalDisconnect:
    'This stream has been disconnected for operational reasons. Please reconnect.',
  SlowReader:
    'This stream has been disconnected because your client was unable to keep up with the rate of new data.',
  ConnectionPurged: 'This stream has been disconnected. Please reconnect.',
}

/** X's operational-disconnect message, framed (ends with `\r\n`). */
function disconnectLine(type: DisconnectType, detail = DISCONNECT_DETAIL[type]): string {
  return (
    JSON.stringify({
      errors: [
        {
          title: 'operational-disconnect',
          disconnect_type: type,
          detail,
          type: `${PROBLEM_BASE}operational-disconnect`,
        },
      ],
    }) + '\r\n'
  )
}

/** 429 `TooManyConnections`, X's body. */
export function tooManyConnections(): ApiError {
  return new ApiError(429, {
    title: 'ConnectionException',
    detail: 'This stream is currently at the maximum allowed connection limit.',
    connection_issue: 'TooManyConnections',
    type: `${PROBLEM_BASE}streaming-connection`,
  })
}

export interface StreamConnectionOptions {
  /** A bare `\r\n` after this long without traffic (X: 10 s… at most 20 s). */
  keepAliveMs: number
  /** Bytes queued in user space (`writableLength`) past which the reader is cut off. */
  maxBufferedBytes: number
  /** After the last line, how long a client may take to drain it before its socket is dropped. */
  closeGraceMs?: number
}

export type CloseReason = 'client' | DisconnectType

let nextConnectionId = 1

/** One open stream. Every method is safe to call after it closed (they do nothing). */
export class StreamConnection {
  readonly id = nextConnectionId++
  readonly openedAt = Date.now()
  /** Messages written (keep-alives excluded). */
  sent = 0
  private lastWrite = Date.now()
  private keepAliveTimer: NodeJS.Timeout | undefined
  private slowCheck: NodeJS.Timeout | undefined
  private graceTimer: NodeJS.Timeout | undefined
  private ended = false
  private reason: CloseReason | undefined
  private readonly listeners: Array<(reason: CloseReason) => void> = []
  /** Resolves once the socket is closed, whatever the reason. */
  readonly closed: Promise<CloseReason>

  constructor(
    readonly appId: string,
    private readonly res: ServerResponse,
    private readonly options: StreamConnectionOptions,
  ) {
    this.closed = new Promise((resolve) => {
      res.once('close', () => {
        clearTimeout(this.keepAliveTimer)
        clearTimeout(this.graceTimer)
        this.ended = true
        const reason = this.reason ?? 'client'
        this.reason = reason
        for (const fn of this.listeners.splice(0)) {
          try {
            fn(reason)
          } catch {
            // A listener's failure must not keep the others from running.
          }
        }
        resolve(reason)
      })
    })
    this.scheduleKeepAlive(options.keepAliveMs)
  }

  /** True until the stream is ending (cut off, shut down, or the client left). */
  get open(): boolean {
    return !this.ended
  }

  /** Bytes waiting in user space for the client. */
  get buffered(): number {
    return this.res.writableLength
  }

  /** Called once, when the socket closes; immediately (next tick) if it already has. */
  onClose(fn: (reason: CloseReason) => void): void {
    if (this.res.closed && this.reason) queueMicrotask(() => fn(this.reason!))
    else this.listeners.push(fn)
  }

  /** Writes one message (an object, or a JSON text without its line end). False once closed. */
  send(message: unknown): boolean {
    if (this.ended) return false
    const line = typeof message === 'string' ? message : JSON.stringify(message)
    this.res.write(line + '\r\n')
    this.sent += 1
    this.lastWrite = Date.now()
    const buffered = this.res.writableLength
    const bound = this.options.maxBufferedBytes
    if (buffered > bound * HARD_BOUND_FACTOR) {
      this.disconnect('SlowReader')
      return false
    }
    // A batch written in one tick can pass the bound however fast the client reads: it is slow
    // only if the buffer is still over the bound once the socket has had time to drain.
    if (buffered > bound && !this.slowCheck) {
      this.slowCheck = setTimeout(() => {
        this.slowCheck = undefined
        if (!this.ended && this.res.writableLength > bound) this.disconnect('SlowReader')
      }, SLOW_READER_GRACE_MS)
      this.slowCheck.unref()
    }
    return true
  }

  /** Sends the operational-disconnect line and ends the stream; drops the socket after a grace. */
  disconnect(type: DisconnectType, detail?: string): void {
    if (this.ended) return
    this.ended = true
    this.reason = type
    clearTimeout(this.keepAliveTimer)
    clearTimeout(this.slowCheck)
    this.res.end(disconnectLine(type, detail))
    // A reader that does not drain never lets `end` finish: its buffer is released by force.
    this.graceTimer = setTimeout(() => this.res.destroy(), this.options.closeGraceMs ?? 1_000)
    this.graceTimer.unref()
  }

  /** Ends the stream without a disconnect line: it has sent all it had to (a bounded replay). */
  end(): void {
    if (this.ended) return
    this.ended = true
    clearTimeout(this.keepAliveTimer)
    clearTimeout(this.slowCheck)
    this.res.end()
    this.graceTimer = setTimeout(() => this.res.destroy(), this.options.closeGraceMs ?? 1_000)
    this.graceTimer.unref()
  }

  private scheduleKeepAlive(ms: number): void {
    this.keepAliveTimer = setTimeout(() => {
      if (this.ended) return
      const quiet = Date.now() - this.lastWrite
      if (quiet >= this.options.keepAliveMs) {
        this.res.write('\r\n')
        this.lastWrite = Date.now()
        this.scheduleKeepAlive(this.options.keepAliveMs)
      } else {
        this.scheduleKeepAlive(this.options.keepAliveMs - quiet)
      }
    }, ms)
    this.keepAliveTimer.unref()
  }
}

export interface StreamRegistryOptions extends StreamConnectionOptions {
  /** Names the slots in Redis: two kinds of stream have separate limits. */
  kind: string
  /** Open connections allowed per app (X: 1 for the filtered stream). */
  maxPerApp: number
  /**
   * When given, the limit counts connections across every instance sharing the Redis; otherwise
   * per instance.
   */
  slots?: ConnectionSlots
  logger?: Logger
}

/** The open streams of one kind, per app, with their connection limit. */
export class StreamRegistry {
  private readonly byApp = new Map<string, Set<StreamConnection>>()
  private readonly openListeners: Array<(conn: StreamConnection) => void> = []
  private readonly lastCloseListeners: Array<(appId: string) => void> = []
  private closing = false
  private readonly log: Logger | undefined

  constructor(readonly options: StreamRegistryOptions) {
    this.log = options.logger?.child({ component: `stream-${options.kind}` })
  }

  /** Every open connection of an app (empty when none). */
  connections(appId: string): ReadonlySet<StreamConnection> {
    return this.byApp.get(appId) ?? new Set()
  }

  /** The apps with at least one open connection. */
  apps(): IterableIterator<string> {
    return this.byApp.keys()
  }

  get size(): number {
    let n = 0
    for (const set of this.byApp.values()) n += set.size
    return n
  }

  /** Called for each connection opened (after the headers were sent). */
  onOpen(fn: (conn: StreamConnection) => void): void {
    this.openListeners.push(fn)
  }

  /** Called when an app's last open connection closes. */
  onAppIdle(fn: (appId: string) => void): void {
    this.lastCloseListeners.push(fn)
  }

  /**
   * Checks the app's connection limit without taking anything: lets a route refuse with 429 before
   * it does other work. `open` checks again.
   */
  private localCount(appId: string): number {
    return this.byApp.get(appId)?.size ?? 0
  }

  /**
   * Takes over the reply (Fastify no longer touches it), sends 200 with the headers set so far, and
   * registers the connection. Throws the 429 `TooManyConnections` ApiError past the app's limit, or
   * a 503 while shutting down, before anything is written.
   */
  async open(reply: FastifyReply, appId: string): Promise<StreamConnection> {
    if (this.closing) throw unavailable()
    const limit = this.options.maxPerApp
    let release: (() => Promise<void>) | undefined
    if (this.options.slots) {
      release = await this.options.slots.acquire(`${this.options.kind}:${appId}`, limit)
      if (!release) throw tooManyConnections()
    } else if (this.localCount(appId) >= limit) {
      throw tooManyConnections()
    }
    if (this.closing || reply.raw.destroyed) {
      await release?.()
      throw unavailable()
    }

    reply.hijack()
    const res = reply.raw
    const headers: Record<string, string | number | string[]> = {}
    for (const [k, v] of Object.entries(reply.getHeaders())) if (v !== undefined) headers[k] = v
    headers['content-type'] = 'application/json; charset=utf-8'
    headers['cache-control'] = 'no-cache'
    headers['x-accel-buffering'] = 'no'
    res.writeHead(200, headers)
    res.flushHeaders()
    // Small messages must leave at once: latency matters more than packet count here.
    res.socket?.setNoDelay(true)

    const conn = new StreamConnection(appId, res, this.options)
    let set = this.byApp.get(appId)
    if (!set) this.byApp.set(appId, (set = new Set()))
    set.add(conn)
    this.log?.debug({ appId, conn: conn.id }, 'stream opened')
    conn.onClose((reason) => {
      void release?.()
      const s = this.byApp.get(appId)
      s?.delete(conn)
      this.log?.debug({ appId, conn: conn.id, reason, sent: conn.sent }, 'stream closed')
      if (s && s.size === 0) {
        this.byApp.delete(appId)
        for (const fn of this.lastCloseListeners) fn(appId)
      }
    })
    for (const fn of this.openListeners) fn(conn)
    return conn
  }

  /**
   * Shutdown: refuses new streams, sends every open one the `OperationalDisconnect` line and waits
   * until all are closed (clients that do not drain are dropped after the grace).
   */
  async closeAll(detail?: string): Promise<void> {
    this.closing = true
    const all = [...this.byApp.values()].flatMap((s) => [...s])
    for (const conn of all) conn.disconnect('OperationalDisconnect', detail)
    await Promise.all(all.map((c) => c.closed))
  }
}

function unavailable(): ApiError {
  return new ApiError(503, {
    title: 'Service Unavailable',
    type: `${PROBLEM_BASE}service-unavailable`,
    status: 503,
    detail: 'Service Unavailable',
  })
}
