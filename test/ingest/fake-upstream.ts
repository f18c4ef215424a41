import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import zlib, { createGzip } from 'node:zlib'

/**
 * A small X-compatible upstream for the ingest's tests: stream rules, the filtered stream (rules
 * matched on `conversation_id:X` only), search by conversation with pagination, and lookup, with
 * faults injected on demand. Test-only: nothing at run time imports it.
 */

interface StoredLine {
  data: { id: string; conversation_id?: string; [k: string]: unknown }
  includes?: unknown
}

export interface RequestLog {
  method: string
  path: string
  query: Record<string, string>
  body?: unknown
}

type ConnectFault = { status: number; body?: unknown; headers?: Record<string, string> }

export class FakeUpstream {
  private server: Server | undefined
  private nextRuleId = 1n
  readonly rules = new Map<string, { id: string; value: string }>()
  /** Everything the upstream "has", by conversation, oldest first. */
  private readonly posts = new Map<string, StoredLine[]>()
  private readonly streams = new Set<StreamOut>()
  readonly requests: RequestLog[] = []
  /** False: `backfill_minutes` is refused with a 400 naming it, as X refuses it without access. */
  grantBackfill = true
  /** Answers given to the next stream connections instead of a stream, in order. */
  readonly connectFaults: ConnectFault[] = []
  /** Values the upstream refuses (as X refuses a rule that does not parse). */
  rejectValue: (value: string) => string | undefined = (v) =>
    v.includes('bad:') ? `Reference to invalid operator 'bad' (at position 1)` : undefined
  pageSize = 5
  /** When set, a search page request waits for this before answering. */
  searchGate: ((req: RequestLog) => Promise<void>) | undefined
  keepAliveMs = 0
  /** While true, no keep-alives are sent (a silent stream). */
  silent = false
  /** Streams are sent gzip-encoded to a client that accepts it (flushed after every write). */
  gzip = false
  /** Stream connections answered gzip-encoded. */
  gzipped = 0
  private keepAlive: NodeJS.Timeout | undefined
  /** Stream connections that were opened (with their query), in order. */
  readonly connections: Array<Record<string, string>> = []

  get url(): string {
    const address = this.server?.address() as AddressInfo
    return `http://127.0.0.1:${address.port}`
  }

  get openStreams(): number {
    return this.streams.size
  }

  async start(): Promise<this> {
    this.server = createServer((req, res) => {
      void this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent) this.send(res, 500, { title: String(err) })
      })
    })
    await new Promise<void>((resolve) => this.server!.listen(0, '127.0.0.1', resolve))
    if (this.keepAliveMs > 0) {
      this.keepAlive = setInterval(() => {
        if (!this.silent) for (const s of this.streams) s.write('\r\n')
      }, this.keepAliveMs)
    }
    return this
  }

  async close(): Promise<void> {
    clearInterval(this.keepAlive)
    for (const s of this.streams) s.destroy()
    this.streams.clear()
    this.server?.closeAllConnections()
    await new Promise<void>((resolve) =>
      this.server ? this.server.close(() => resolve()) : resolve(),
    )
  }

  /** Adds Posts to what search and lookup can find (not streamed). */
  addHistory(lines: readonly string[]): void {
    for (const line of lines) {
      const parsed = JSON.parse(line) as StoredLine
      const conv = parsed.data.conversation_id ?? parsed.data.id
      const list = this.posts.get(conv) ?? []
      list.push({ data: parsed.data, includes: parsed.includes })
      this.posts.set(conv, list)
    }
  }

  /** Stores the Post and sends it to every stream whose rules match it. */
  publish(line: string): void {
    this.addHistory([line])
    const parsed = JSON.parse(line) as StoredLine
    const conv = parsed.data.conversation_id ?? parsed.data.id
    const matching = [...this.rules.values()].filter((r) => r.value === `conversation_id:${conv}`)
    if (matching.length === 0) return
    const out = JSON.stringify({
      data: parsed.data,
      includes: parsed.includes,
      matching_rules: matching.map((r) => ({ id: r.id, tag: '' })),
    })
    for (const s of this.streams) s.write(`${out}\r\n`)
  }

  /** Writes a raw line (malformed on purpose, or an error notice) to every open stream. */
  sendRaw(line: string): void {
    for (const s of this.streams) s.write(`${line}\r\n`)
  }

  /** X's operational disconnect: an error line, then the connection ends. */
  disconnect(type = 'OperationalDisconnect'): void {
    this.sendRaw(
      JSON.stringify({
        errors: [
          {
            title: 'operational-disconnect',
            disconnect_type: type,
            detail: 'This stream has been disconnected for operational reasons.',
            type: 'https://api.twitter.com/2/problems/operational-disconnect',
          },
        ],
      }),
    )
    for (const s of this.streams) s.end()
    this.streams.clear()
  }

  /** Cuts every stream's socket without a word (a network failure). */
  cut(): void {
    for (const s of this.streams) s.destroy()
    this.streams.clear()
  }

  private send(
    res: ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', ...headers })
    res.end(JSON.stringify(body))
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://x')
    const query = Object.fromEntries(url.searchParams)
    let body: unknown
    if (req.method === 'POST') {
      const chunks: Buffer[] = []
      for await (const c of req) chunks.push(c as Buffer)
      body = JSON.parse(Buffer.concat(chunks).toString('utf8'))
    }
    const log: RequestLog = { method: req.method ?? 'GET', path: url.pathname, query, body }
    this.requests.push(log)
    const rl = {
      'x-rate-limit-limit': '450',
      'x-rate-limit-remaining': '449',
      'x-rate-limit-reset': String(Math.ceil(Date.now() / 1000) + 900),
    }

    if (url.pathname === '/2/tweets/search/stream/rules') {
      if (req.method === 'GET') {
        const data = [...this.rules.values()]
        return this.send(res, 200, {
          ...(data.length ? { data } : {}),
          meta: { sent: new Date().toISOString(), result_count: data.length },
        })
      }
      const b = body as { add?: Array<{ value: string }>; delete?: { ids: string[] } }
      if (b.add) {
        const data: unknown[] = []
        const errors: unknown[] = []
        for (const { value } of b.add) {
          const reason = this.rejectValue(value)
          const existing = [...this.rules.values()].find((r) => r.value === value)
          if (reason) {
            errors.push({
              value,
              details: [reason],
              title: 'UnprocessableEntity',
              type: 'https://api.twitter.com/2/problems/invalid-rules',
            })
          } else if (existing) {
            errors.push({
              value,
              id: existing.id,
              title: 'DuplicateRule',
              type: 'https://api.twitter.com/2/problems/duplicate-rules',
            })
          } else {
            const id = String(1_800_000_000_000_000_000n + this.nextRuleId++)
            this.rules.set(id, { id, value })
            data.push({ value, id })
          }
        }
        return this.send(res, data.length ? 201 : 200, {
          ...(data.length ? { data } : {}),
          meta: { sent: new Date().toISOString() },
          ...(errors.length ? { errors } : {}),
        })
      }
      if (b.delete) {
        let deleted = 0
        for (const id of b.delete.ids) if (this.rules.delete(id)) deleted += 1
        return this.send(res, 200, {
          meta: { sent: new Date().toISOString(), summary: { deleted } },
        })
      }
      return this.send(res, 400, { title: 'Invalid Request' })
    }

    if (url.pathname === '/2/tweets/search/stream') {
      this.connections.push(query)
      const fault = this.connectFaults.shift()
      if (fault)
        return this.send(res, fault.status, fault.body ?? { title: 'fault' }, fault.headers)
      if (!this.grantBackfill && query.backfill_minutes !== undefined) {
        return this.send(res, 400, {
          errors: [
            {
              parameters: { backfill_minutes: [query.backfill_minutes] },
              message: 'The `backfill_minutes` query parameter is not available to this client.',
            },
          ],
          title: 'Invalid Request',
          detail: 'One or more parameters to your request was invalid.',
          type: 'https://api.twitter.com/2/problems/invalid-request',
        })
      }
      if (this.rules.size === 0) {
        return this.send(res, 409, {
          title: 'ConnectionException',
          connection_issue: 'RuleConfigurationIssue',
          type: 'https://api.twitter.com/2/problems/streaming-connection',
        })
      }
      const gzip = this.gzip && /\bgzip\b/.test(String(req.headers['accept-encoding'] ?? ''))
      res.writeHead(200, {
        'content-type': 'application/json; charset=utf-8',
        ...(gzip ? { 'content-encoding': 'gzip' } : {}),
      })
      res.flushHeaders()
      if (gzip) this.gzipped += 1
      const out = gzip ? gzipOut(res) : res
      this.streams.add(out)
      res.on('close', () => this.streams.delete(out))
      return
    }

    const searchMatch = /^\/2\/tweets\/search\/(recent|all)$/.exec(url.pathname)
    if (searchMatch) {
      // `conversation_id:A`, or several OR-combined (window recovery), after `since_id` if given.
      const terms = (query.query ?? '').split(' OR ')
      const convs = terms.map((t) => /^conversation_id:(\d+)$/.exec(t)?.[1])
      if (convs.some((c) => c === undefined))
        return this.send(res, 400, { title: 'Invalid Request' })
      await this.searchGate?.(log)
      const since = query.since_id === undefined ? undefined : BigInt(query.since_id)
      // Newest first; the token is the index of the next page's first item.
      const all = convs
        .flatMap((c) => this.posts.get(c!) ?? [])
        .filter((p) => since === undefined || BigInt(p.data.id) > since)
        .sort((a, b) => (BigInt(b.data.id) > BigInt(a.data.id) ? 1 : -1))
      const start = query.next_token ? Number(query.next_token.replace('tok', '')) : 0
      const page = all.slice(start, start + this.pageSize)
      if (page.length === 0) return this.send(res, 200, { meta: { result_count: 0 } }, rl)
      const users = page.flatMap((p) => (p.includes as { users?: unknown[] })?.users ?? [])
      const next = start + this.pageSize < all.length ? `tok${start + this.pageSize}` : undefined
      return this.send(
        res,
        200,
        {
          data: page.map((p) => p.data),
          includes: { users },
          meta: {
            result_count: page.length,
            newest_id: page[0]!.data.id,
            oldest_id: page.at(-1)!.data.id,
            ...(next ? { next_token: next } : {}),
          },
        },
        rl,
      )
    }

    if (url.pathname === '/2/tweets') {
      const ids = (query.ids ?? '').split(',')
      const found = [...this.posts.values()].flat().filter((p) => ids.includes(p.data.id))
      if (found.length === 0)
        return this.send(res, 200, { errors: [{ title: 'Not Found Error' }] }, rl)
      return this.send(
        res,
        200,
        {
          data: found.map((p) => p.data),
          includes: {
            users: found.flatMap((p) => (p.includes as { users?: unknown[] })?.users ?? []),
          },
        },
        rl,
      )
    }

    return this.send(res, 404, { title: 'Not Found Error' })
  }
}

/** What a stream is written through: the response itself, or a gzip stream in front of it. */
interface StreamOut {
  write(chunk: string): unknown
  end(): unknown
  destroy(): unknown
}

/** Gzip in front of a response, flushed after each write so that every line arrives at once. */
function gzipOut(res: ServerResponse): StreamOut {
  const gz = createGzip()
  gz.pipe(res)
  return {
    write: (chunk) => {
      gz.write(chunk)
      gz.flush(zlib.Z_SYNC_FLUSH)
    },
    end: () => gz.end(),
    destroy: () => {
      gz.destroy()
      res.destroy()
    },
  }
}
