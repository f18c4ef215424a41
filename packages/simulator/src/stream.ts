import type { ServerResponse } from 'node:http'
import type { Logger } from '@threadline/logger'
import type { Rule, RuleStore } from './rules.js'
import { IncludesBuilder, postJson, type View } from './serialize.js'
import type { SimPost, World } from './world.js'

const CRLF = '\r\n'
/** Posts of a backfill a step of its replay matches against the rules (see replayStep). */
const REPLAY_SCAN = 2_000

export type Route =
  'stream' | 'rules' | 'search' | 'lookup' | 'users' | 'compliance' | 'compliance-jobs' | 'any'

export interface FailNextOptions {
  /** HTTP status to answer with (429 carries x-rate-limit-reset). Default 429. */
  status?: number
  /** Which requests fail; default the stream connect. */
  route?: Route
  /** Seconds until x-rate-limit-reset on the 429. Default 1. */
  resetSeconds?: number
}

export type MalformedKind = 'truncated' | 'not-json' | 'no-id'

/** Faults on demand. Each applies to what happens next (or now), then wears off. */
export interface Faults {
  /** The next `count` requests of `route` answer `status` instead of being served. */
  failNext(count: number, options?: FailNextOptions): void
  /** Ends every open stream now: abruptly (socket destroyed) or with an operational-disconnect line. */
  dropStreams(options?: { graceful?: boolean }): number
  /** Open streams get nothing (no Posts, no keep-alives) for `ms`; Posts meant for them are lost. */
  silence(ms: number): void
  /** Writes `count` malformed lines to every open stream now. */
  malformed(count: number, kind?: MalformedKind): void
  /** The next `count` Posts delivered are each sent twice. */
  duplicateNext(count: number): void
  /** The next `count` Posts delivered are held and then sent in reverse order (replies first). */
  reorderNext(count: number): void
  /** Clears every pending fault. */
  reset(): void
}

export interface PendingFailure {
  count: number
  status: number
  route: Route
  resetSeconds: number
}

export interface RuleDeliveries {
  value: string
  tag: string
  count: number
  ids: string[]
}

export interface Deliveries {
  /** Post lines written on streams (a duplicated Post counts twice). */
  total: number
  /** Ids in the order written, when recording (the first RECORD_LIMIT; see `truncated`). */
  ids: string[]
  byRule: Record<string, RuleDeliveries>
  /** True once a list of ids reached RECORD_LIMIT and stopped growing (the counts go on). */
  truncated: boolean
  /**
   * Ids the rules matched while no stream was connected: X sends them to no one and keeps nothing
   * for a client that was away, so only recovery brings them back (when recording).
   */
  unheard: string[]
}

/**
 * Ids a record keeps, overall and per rule: enough for any test, and a simulator left running at
 * thousands of Posts a second (a demo, a soak) does not grow for ever.
 */
export const RECORD_LIMIT = 1_000_000

interface Connection {
  res: ServerResponse
  view: View
  lastWriteMs: number
  timer: NodeJS.Timeout
  blocked: boolean
  /** Lines rendered ahead (prepare), written by pump as the reader takes them. */
  prepared: { chunk: Buffer; items: { post: SimPost; rules: Rule[] }[] }[]
  /** The Posts of a `backfill_minutes` replay, oldest first, and how far it has got. */
  replay: SimPost[]
  replayAt: number
}

export interface StreamHubOptions {
  world: World
  rules: RuleStore
  logger: Logger
  keepAliveMs: number
  maxBufferBytes: number
  slowReader: 'disconnect' | 'pause'
  recordDeliveries: boolean
  /** Ids the record keeps (default RECORD_LIMIT). */
  recordLimit?: number
}

/** Open filtered-stream connections: matching, framing, keep-alives, faults and the record of what was sent. */
export class StreamHub {
  private readonly connections = new Set<Connection>()
  private silentUntil = 0
  private duplicates = 0
  private reorderLeft = 0
  private held: { post: SimPost; rules: Rule[] }[] = []
  readonly failures: PendingFailure[] = []
  private deliveries: Deliveries = {
    total: 0,
    ids: [],
    byRule: {},
    truncated: false,
    unheard: [],
  }

  constructor(private readonly options: StreamHubOptions) {}

  get size(): number {
    return this.connections.size
  }

  /** True while a slow reader holds generation back (slowReader: 'pause'). */
  get blocked(): boolean {
    for (const c of this.connections) if (c.blocked) return true
    return false
  }

  /**
   * Takes over a 200 response whose headers are sent. `backlog` (a `backfill_minutes` replay, oldest
   * first) is sent as the reader takes it, the Posts that the rules match only; live Posts are
   * written meanwhile as they come.
   */
  open(res: ServerResponse, view: View, backlog: SimPost[]): void {
    const conn: Connection = {
      res,
      view,
      lastWriteMs: Date.now(),
      blocked: false,
      prepared: [],
      replay: backlog,
      replayAt: 0,
      timer: setInterval(
        () => {
          const now = Date.now()
          if (now < this.silentUntil || now - conn.lastWriteMs < this.options.keepAliveMs) return
          this.write(conn, CRLF)
        },
        Math.max(5, Math.floor(this.options.keepAliveMs / 4)),
      ),
    }
    this.connections.add(conn)
    res.on('close', () => this.forget(conn))
    res.on('drain', () => {
      conn.blocked = false
      this.pumpTo(conn)
    })
    this.pumpTo(conn)
  }

  private forget(conn: Connection) {
    clearInterval(conn.timer)
    this.connections.delete(conn)
  }

  /** Sends new Posts to every open stream, with the faults that are pending. */
  deliver(posts: SimPost[]): void {
    if (this.options.rules.size === 0) return
    if (this.connections.size === 0) return this.recordUnheard(posts)
    let items: { post: SimPost; rules: Rule[] }[] = []
    for (const post of posts) {
      const rules = this.options.rules.match(post.wire)
      if (rules.length > 0) items.push({ post, rules })
    }
    if (items.length === 0) return
    if (this.reorderLeft > 0) {
      const take = Math.min(this.reorderLeft, items.length)
      this.held.push(...items.slice(0, take))
      this.reorderLeft -= take
      items = items.slice(take)
      if (this.reorderLeft === 0) {
        items = [...this.held.reverse(), ...items]
        this.held = []
      }
    }
    if (this.duplicates > 0) {
      const doubled: typeof items = []
      for (const item of items) {
        doubled.push(item)
        if (this.duplicates > 0) {
          this.duplicates--
          doubled.push(item)
        }
      }
      items = doubled
    }
    if (items.length === 0) return
    if (Date.now() < this.silentUntil) return
    for (const conn of this.connections) this.deliverTo(conn, items)
  }

  /**
   * Renders `posts` now for every open stream and queues their lines; `pump` writes them as fast as
   * each reader takes them. For benchmarks that must not count the upstream's own work: all the
   * rendering happens before the first line is written. Faults do not apply to prepared lines, and
   * a stream that closes loses what was queued for it.
   */
  prepare(posts: SimPost[], chunkSize = 500): number {
    const items = posts.flatMap((post) => {
      const rules = this.options.rules.match(post.wire)
      return rules.length > 0 ? [{ post, rules }] : []
    })
    for (const conn of this.connections) {
      for (let i = 0; i < items.length; i += chunkSize) {
        const slice = items.slice(i, i + chunkSize)
        // As bytes: encoding at write time would be the upstream's work inside the measured time.
        conn.prepared.push({ chunk: Buffer.from(this.render(slice, conn.view)), items: slice })
      }
    }
    return items.length
  }

  /** Writes prepared lines to every stream until its reader falls behind (resumed on drain). */
  pump(): void {
    for (const conn of this.connections) this.pumpTo(conn)
  }

  private pumpTo(conn: Connection) {
    while (!conn.blocked && this.connections.has(conn)) {
      const next = conn.prepared.shift()
      if (!next) {
        if (this.replayStep(conn)) continue
        return
      }
      this.write(conn, next.chunk)
      this.record(next.items)
    }
  }

  /**
   * Writes the next lines of a connection's replay as X sends a backfill: at the reader's pace, and
   * only the Posts that some rule matches. A step writes while the socket holds less than a quarter
   * of what a slow reader may leave unread (or its high-water mark, if more), so the replay alone
   * never gets the reader cut off (a step's characters count as bytes: at most three times as many
   * for non-ASCII text, still under the limit); and it looks at REPLAY_SCAN Posts at most, so
   * replaying minutes of a high rate does not hold the event loop. Returns whether to go on at once;
   * otherwise the replay resumes on the socket's drain (or on the next turn of the event loop).
   */
  private replayStep(conn: Connection): boolean {
    const { replay, res } = conn
    if (conn.replayAt >= replay.length) return false
    // At or over the socket's high-water mark, the last write asked for a drain, which resumes this.
    const limit = Math.max(this.options.maxBufferBytes / 4, res.writableHighWaterMark)
    const budget = limit - res.writableLength
    if (budget <= 0) return false
    const items: { post: SimPost; rules: Rule[] }[] = []
    let chunk = ''
    const end = Math.min(replay.length, conn.replayAt + REPLAY_SCAN)
    while (conn.replayAt < end && chunk.length < budget) {
      const post = replay[conn.replayAt++]!
      const rules = this.options.rules.match(post.wire)
      if (rules.length === 0) continue
      items.push({ post, rules })
      chunk += this.line(post, rules, conn.view)
    }
    if (conn.replayAt >= replay.length) conn.replay = []
    if (items.length > 0) {
      this.write(conn, chunk)
      this.record(items)
      return true
    }
    // Nothing matched in this stretch: go on after other work, there being no write to drain.
    if (conn.replay.length > 0) setImmediate(() => this.pumpTo(conn))
    return false
  }

  private render(items: { post: SimPost; rules: Rule[] }[], view: View): string {
    let chunk = ''
    for (const { post, rules } of items) chunk += this.line(post, rules, view)
    return chunk
  }

  private deliverTo(conn: Connection, items: { post: SimPost; rules: Rule[] }[]) {
    // One write per batch: at benchmark rates a write per Post costs more than the Posts.
    this.write(conn, this.render(items, conn.view))
    this.record(items)
  }

  private recordUnheard(posts: SimPost[]) {
    const d = this.deliveries
    if (!this.options.recordDeliveries) return
    const limit = this.options.recordLimit ?? RECORD_LIMIT
    for (const post of posts) {
      if (this.options.rules.match(post.wire).length === 0) continue
      if (d.unheard.length < limit) d.unheard.push(post.id)
      else d.truncated = true
    }
  }

  private record(items: { post: SimPost; rules: Rule[] }[]) {
    const d = this.deliveries
    d.total += items.length
    if (!this.options.recordDeliveries) return
    const limit = this.options.recordLimit ?? RECORD_LIMIT
    for (const { post, rules } of items) {
      if (d.ids.length < limit) d.ids.push(post.id)
      else d.truncated = true
      for (const rule of rules) {
        const r = (d.byRule[rule.id] ??= {
          value: rule.value,
          tag: rule.tag ?? '',
          count: 0,
          ids: [],
        })
        r.count++
        if (r.ids.length < limit) r.ids.push(post.id)
        else d.truncated = true
      }
    }
  }

  private line(post: SimPost, rules: Rule[], view: View): string {
    const includes = new IncludesBuilder(this.options.world, view)
    includes.add(post)
    let matching = ''
    for (const rule of rules) {
      matching += `${matching === '' ? '' : ','}{"id":"${rule.id}","tag":${JSON.stringify(rule.tag ?? '')}}`
    }
    return `{"data":${postJson(this.options.world, post, view)}${includes.suffix()},"matching_rules":[${matching}]}${CRLF}`
  }

  private write(conn: Connection, text: string | Buffer) {
    const { res } = conn
    if (res.destroyed || res.writableEnded) return
    res.write(text)
    conn.lastWriteMs = Date.now()
    if (res.writableLength > this.options.maxBufferBytes) {
      if (this.options.slowReader === 'pause') {
        conn.blocked = true
        return
      }
      this.options.logger.warn({ buffered: res.writableLength }, 'slow reader disconnected')
      this.end(
        conn,
        'SlowReader',
        'This stream was disconnected because the client could not keep up.',
      )
    }
  }

  private end(conn: Connection, type: string, detail: string) {
    const { res } = conn
    if (!res.destroyed && !res.writableEnded) {
      res.end(
        JSON.stringify({
          errors: [
            {
              title: 'operational-disconnect',
              disconnect_type: type,
              detail,
              type: 'https://api.twitter.com/2/problems/operational-disconnect',
            },
          ],
        }) + CRLF,
      )
    }
    // A client that stops reading would hold the socket open: do not wait for it.
    setTimeout(() => res.destroy(), 200).unref()
    this.forget(conn)
  }

  /** Ends every stream with an operational-disconnect line; resolves once they closed (or soon). */
  async closeAll(waitMs = 250): Promise<void> {
    const closed = [...this.connections].map((conn) => {
      const done = new Promise<void>((resolve) => {
        if (conn.res.destroyed) resolve()
        else conn.res.once('close', () => resolve())
      })
      this.end(conn, 'OperationalDisconnect', 'The server is shutting down.')
      return done
    })
    let timer: NodeJS.Timeout | undefined
    await Promise.race([
      Promise.all(closed),
      new Promise<void>((resolve) => (timer = setTimeout(resolve, waitMs))),
    ])
    clearTimeout(timer)
  }

  readonly faults: Faults = {
    failNext: (count, { status = 429, route = 'stream', resetSeconds = 1 } = {}) => {
      this.failures.push({ count, status, route, resetSeconds })
    },
    dropStreams: ({ graceful = false } = {}) => {
      const n = this.connections.size
      for (const conn of [...this.connections]) {
        if (graceful) this.end(conn, 'OperationalDisconnect', 'Injected disconnect.')
        else {
          this.forget(conn)
          conn.res.socket?.destroy()
          conn.res.destroy()
        }
      }
      return n
    },
    silence: (ms) => {
      this.silentUntil = Date.now() + ms
    },
    malformed: (count, kind = 'truncated') => {
      const lines: Record<MalformedKind, string> = {
        truncated: '{"data":{"id":"1","text":"cut off mid',
        'not-json': 'this is not json <html>',
        'no-id': '{"data":{"text":"a Post without an id"},"matching_rules":[]}',
      }
      for (const conn of this.connections) {
        for (let i = 0; i < count; i++) this.write(conn, lines[kind] + CRLF)
      }
    },
    duplicateNext: (count) => {
      this.duplicates += count
    },
    reorderNext: (count) => {
      this.reorderLeft += count
    },
    reset: () => {
      this.failures.length = 0
      this.silentUntil = 0
      this.duplicates = 0
      this.reorderLeft = 0
      this.held = []
    },
  }

  /** Takes a pending failure for this request, if one applies. */
  takeFailure(route: Route): PendingFailure | undefined {
    const f = this.failures.find((x) => x.route === route || x.route === 'any')
    if (!f) return undefined
    f.count--
    if (f.count <= 0) this.failures.splice(this.failures.indexOf(f), 1)
    return f
  }

  sent(): Deliveries {
    return this.deliveries
  }

  resetSent(): void {
    this.deliveries = { total: 0, ids: [], byRule: {}, truncated: false, unheard: [] }
  }
}
