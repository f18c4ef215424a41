import http from 'node:http'
import { snowflakeTime } from '@threadline/domain'

/**
 * Clients that read the API while faults happen, and the tally of what it answered. Their loops pace
 * themselves with short timers (a client's polling interval), never to wait for an outcome.
 */

/** Requests by HTTP status (`error` for a request that got no response at all). */
export class StatusTally {
  readonly counts = new Map<string, number>()

  add(status: number | 'error'): void {
    const key = String(status)
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }

  get total(): number {
    let n = 0
    for (const v of this.counts.values()) n += v
    return n
  }

  /** What the API must never answer, even during faults: anything but 2xx, 4xx and 503. */
  unexpected(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const [k, v] of this.counts) {
      const ok = /^[24]\d\d$/.test(k) || k === '503'
      if (!ok) out[k] = v
    }
    return out
  }

  byClass(): Record<string, number> {
    const out: Record<string, number> = {}
    for (const [k, v] of this.counts) {
      const c = k === '503' ? '503' : /^\d\d\d$/.test(k) ? `${k[0]}xx` : k
      out[c] = (out[c] ?? 0) + v
    }
    return out
  }
}

const pause = (ms: number) => new Promise((r) => setTimeout(r, ms))

export interface Poller {
  /** Latencies (ms) from a Post's creation to the poll that first saw it in search, with the time seen. */
  visibility: Array<{ at: number; ms: number }>
  seen: Set<string>
  stop(): Promise<void>
}

/**
 * Polls `GET /2/tweets/search/recent` for each query in turn (since the newest id seen per query) and
 * records each status, and how long each new Post took from creation to being searchable.
 */
export function startSearchPoller(options: {
  apiUrl: string
  token: string
  queries: string[]
  tally: StatusTally
  intervalMs: number
}): Poller {
  let stopped = false
  const startedAt = Date.now()
  const newest = new Map<string, string>()
  const seen = new Set<string>()
  const visibility: Poller['visibility'] = []
  const loop = async () => {
    while (!stopped) {
      for (const query of options.queries) {
        if (stopped) break
        const since = newest.get(query)
        const params = new URLSearchParams({ query, max_results: '100' })
        if (since) params.set('since_id', since)
        try {
          const res = await fetch(`${options.apiUrl}/2/tweets/search/recent?${params}`, {
            headers: { authorization: `Bearer ${options.token}` },
            signal: AbortSignal.timeout(15_000),
          })
          options.tally.add(res.status)
          const body = (await res.json().catch(() => undefined)) as
            { data?: Array<{ id: string }>; meta?: { newest_id?: string } } | undefined
          if (res.status === 200 && body?.data) {
            const now = Date.now()
            for (const { id } of body.data) {
              if (seen.has(id)) continue
              seen.add(id)
              // Only Posts made after polling began say something about pipeline latency (backfilled
              // history is old by design).
              const created = snowflakeTime(id)?.getTime()
              if (since && created !== undefined && created >= startedAt)
                visibility.push({ at: now, ms: now - created })
            }
            if (body.meta?.newest_id) newest.set(query, body.meta.newest_id)
          } else if (res.status === 200 && !since) {
            // Nothing yet: later polls ask only for what is new from now on.
            newest.set(query, '1')
          }
        } catch {
          options.tally.add('error')
        }
      }
      await pause(options.intervalMs)
    }
  }
  const done = loop()
  return {
    visibility,
    seen,
    async stop() {
      stopped = true
      await done
    },
  }
}

export interface StreamReader {
  ids: Set<string>
  /** From each new Post's creation (its snowflake time) to its arrival here, with the arrival time. */
  latency: Array<{ at: number; ms: number }>
  connects: number
  disconnects: number
  /** `disconnect_type` of each operational-disconnect line the API sent (e.g. SlowReader). */
  disconnectTypes: string[]
  stop(): Promise<void>
}

/**
 * A filtered-stream client (`GET /2/tweets/search/stream`) that reconnects when the connection ends,
 * as X's clients do, and records every Post id it receives.
 */
export function startStreamReader(options: {
  apiUrl: string
  token: string
  tally: StatusTally
  /** Query string for the connection (fields, expansions). */
  query?: string
}): StreamReader {
  const reader: StreamReader = {
    ids: new Set(),
    latency: [],
    connects: 0,
    disconnects: 0,
    disconnectTypes: [],
    stop: async () => {},
  }
  let stopped = false
  const startedAt = Date.now()
  let current: http.ClientRequest | undefined
  const once = () =>
    new Promise<void>((resolve) => {
      const req = http.get(
        `${options.apiUrl}/2/tweets/search/stream${options.query ? `?${options.query}` : ''}`,
        { headers: { authorization: `Bearer ${options.token}` } },
        (res) => {
          options.tally.add(res.statusCode ?? 0)
          if (res.statusCode !== 200) {
            res.resume()
            res.on('end', resolve)
            res.on('error', () => resolve())
            return
          }
          reader.connects++
          let buffer = ''
          res.setEncoding('utf8')
          res.on('data', (chunk: string) => {
            buffer += chunk
            let i
            while ((i = buffer.indexOf('\r\n')) >= 0) {
              const line = buffer.slice(0, i)
              buffer = buffer.slice(i + 2)
              if (!line) continue
              try {
                const msg = JSON.parse(line) as {
                  data?: { id?: string }
                  errors?: Array<{ disconnect_type?: string }>
                }
                const type = msg.errors?.[0]?.disconnect_type
                if (type) reader.disconnectTypes.push(type)
                const id = msg.data?.id
                if (id && !reader.ids.has(id)) {
                  reader.ids.add(id)
                  const created = snowflakeTime(id)?.getTime()
                  // Backfilled history is old by design; only Posts made since we began count.
                  if (created !== undefined && created >= startedAt) {
                    const now = Date.now()
                    reader.latency.push({ at: now, ms: now - created })
                  }
                }
              } catch {
                // Not our concern here: the stream tests check framing.
              }
            }
          })
          res.on('close', () => {
            reader.disconnects++
            resolve()
          })
        },
      )
      current = req
      req.on('error', () => {
        // Our own destroy() on stop is not the API's doing.
        if (!stopped) options.tally.add('error')
        resolve()
      })
    })
  const loop = async () => {
    while (!stopped) {
      await once()
      // X's advice for a dropped stream: back off before reconnecting.
      if (!stopped) await pause(500)
    }
  }
  const done = loop()
  reader.stop = async () => {
    stopped = true
    current?.destroy()
    await done
  }
  return reader
}

/** Many fields per Post, so a reader that stops reading fills buffers quickly. */
export const SLOW_FIELDS = new URLSearchParams({
  'tweet.fields':
    'created_at,author_id,conversation_id,entities,public_metrics,lang,referenced_tweets,in_reply_to_user_id,source,reply_settings,edit_history_tweet_ids',
  expansions: 'author_id,referenced_tweets.id,in_reply_to_user_id,entities.mentions.username',
  'user.fields': 'created_at,description,location,name,public_metrics,url,username,verified',
}).toString()

/**
 * Opens a filtered stream and never reads from it: the server must cut it off (SlowReader) instead
 * of buffering without bound. Resolves `closed` when the server ends the connection.
 */
export function openSlowReader(options: { apiUrl: string; token: string }): {
  status: Promise<number>
  closed: Promise<void>
  destroy(): void
} {
  let resolveStatus!: (s: number) => void
  let resolveClosed!: () => void
  const status = new Promise<number>((r) => (resolveStatus = r))
  const closed = new Promise<void>((r) => (resolveClosed = r))
  const req = http.get(
    `${options.apiUrl}/2/tweets/search/stream?${SLOW_FIELDS}`,
    { headers: { authorization: `Bearer ${options.token}` } },
    (res) => {
      resolveStatus(res.statusCode ?? 0)
      // Stop reading at once: the socket's receive window fills and the server's buffer grows.
      res.pause()
      res.socket.pause()
      res.socket.once('close', () => resolveClosed())
    },
  )
  req.on('error', () => {
    resolveStatus(0)
    resolveClosed()
  })
  return {
    status,
    closed,
    destroy: () => req.destroy(),
  }
}

export interface WebhookReceiver {
  url: string
  /** Post ids of the events received (payload.id), each counted once. */
  postIds: Set<string>
  /** Event deliveries received (repeats included), and those answered with a failure. */
  received: number
  refused: number
  /** The next `count` deliveries are answered 503, as a receiver that is down would. */
  failNext(count: number): void
  close(): Promise<void>
}

/** A webhook endpoint that records the activity events POSTed to it. */
export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  let failures = 0
  const receiver: WebhookReceiver = {
    url: '',
    postIds: new Set(),
    received: 0,
    refused: 0,
    failNext: (count) => {
      failures += count
    },
    close: async () => {},
  }
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      if (req.method !== 'POST') {
        // CRC checks are not under test here (the suite registers the webhook directly).
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
        return
      }
      receiver.received++
      if (failures > 0) {
        failures--
        receiver.refused++
        res.writeHead(503).end()
        return
      }
      try {
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as {
          data?: { payload?: { id?: string; data?: { id?: string } } }
        }
        const id = body.data?.payload?.id ?? body.data?.payload?.data?.id
        if (id) receiver.postIds.add(id)
      } catch {
        // Counted as received; an unreadable body simply adds no id.
      }
      res.writeHead(200).end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  receiver.url = `http://127.0.0.1:${(server.address() as { port: number }).port}/webhook`
  receiver.close = async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  }
  return receiver
}
