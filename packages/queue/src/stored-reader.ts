import { duplicateRedis, type Redis } from './connection.js'
import type { Logger } from '@threadline/logger'
import { storedStreamKey, type StoredEntry } from './stored-stream.js'

/** One entry of the `stored` stream with its stream id (`<ms>-<seq>`). */
export interface StoredMessage extends StoredEntry {
  streamId: string
}

type RawEntries = Array<[string, string[]]>

function toMessages(raw: RawEntries): StoredMessage[] {
  const out: StoredMessage[] = []
  for (const [streamId, fields] of raw) {
    const m: Partial<StoredMessage> = { streamId }
    for (let i = 0; i + 1 < fields.length; i += 2) {
      const k = fields[i]
      if (k === 'type' || k === 'id' || k === 'body') m[k] = fields[i + 1] as never
    }
    if (m.type && m.id !== undefined && m.body !== undefined) out.push(m as StoredMessage)
  }
  return out
}

/** Compares two stream ids (`ms-seq`) numerically. */
export function compareStreamIds(a: string, b: string): number {
  const [am = '0', as = '0'] = a.split('-')
  const [bm = '0', bs = '0'] = b.split('-')
  if (am !== bm) return Number(am) - Number(bm)
  return Number(as) - Number(bs)
}

export interface StoredReaderOptions {
  prefix: string
  /** Entries per XREAD. */
  batch: number
  /** How long one XREAD blocks before asking again. */
  blockMs?: number
  logger?: Logger
  /**
   * Receives each batch, in stream order. The next XREAD waits for the returned promise, so a
   * consumer is never handed more than one batch ahead of itself.
   */
  onMessages: (messages: StoredMessage[]) => Promise<void> | void
}

export interface StoredReader {
  /** Resolves once the tail position is known: every entry added after this is delivered. */
  ready: Promise<void>
  /** The id of the last entry handed over (or the tail it started from). */
  readonly lastId: string
  close(): Promise<void>
}

/**
 * Follows the `stored` stream from its tail on a dedicated connection (XREAD BLOCK holds it), so
 * the caller's own connection stays free. Reconnects for as long as it is open and resumes after
 * the last id it handed over, so a Redis restart loses nothing the stream still holds.
 */
export function readStored(redis: Redis, options: StoredReaderOptions): StoredReader {
  const key = storedStreamKey(options.prefix)
  const log = options.logger?.child({ component: 'stored-reader' })
  const blockMs = options.blockMs ?? 5_000
  // Blocking reads wait forever for a reconnect (worker-style), never failing fast.
  const conn = duplicateRedis(redis, 'stored-reader')
  conn.on('error', (err) => log?.debug({ err }, 'stored reader connection error'))
  let closed = false
  let lastId = '0-0'
  let markReady: () => void = () => {}
  const ready = new Promise<void>((resolve) => (markReady = resolve))

  const run = async () => {
    let failures = 0
    for (;;) {
      try {
        const tail = (await conn.xrevrange(key, '+', '-', 'COUNT', 1)) as RawEntries
        lastId = tail[0]?.[0] ?? '0-0'
        break
      } catch (err) {
        if (closed) return
        failures += 1
        log?.warn({ err }, 'reading the stored stream tail failed; retrying')
        await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * failures)))
      }
    }
    markReady()
    failures = 0
    while (!closed) {
      try {
        const res = (await conn.xread(
          'COUNT',
          options.batch,
          'BLOCK',
          blockMs,
          'STREAMS',
          key,
          lastId,
        )) as Array<[string, RawEntries]> | null
        failures = 0
        if (!res || closed) continue
        const raw = res[0]?.[1] ?? []
        if (raw.length === 0) continue
        lastId = raw[raw.length - 1]![0]
        const messages = toMessages(raw)
        if (messages.length > 0) await options.onMessages(messages)
      } catch (err) {
        if (closed) return
        failures += 1
        log?.warn({ err }, 'reading the stored stream failed; retrying')
        await new Promise((r) => setTimeout(r, Math.min(5_000, 200 * failures)))
      }
    }
  }
  const running = run()

  return {
    ready,
    get lastId() {
      return lastId
    },
    async close() {
      closed = true
      markReady()
      // A blocked XREAD only ends with its connection.
      conn.disconnect()
      await running.catch(() => undefined)
    },
  }
}

/**
 * Entries from `sinceMs` up to and including `untilId`, in pages of `count` (the backfill of a
 * stream connection). Entries already trimmed away are simply absent.
 */
export async function* rangeStored(
  redis: Redis,
  prefix: string,
  sinceMs: number,
  untilId: string,
  count = 500,
): AsyncGenerator<StoredMessage[]> {
  const key = storedStreamKey(prefix)
  let start = `${Math.max(0, Math.floor(sinceMs))}-0`
  for (;;) {
    const raw = (await redis.xrange(key, start, untilId, 'COUNT', count)) as RawEntries
    if (raw.length === 0) return
    yield toMessages(raw)
    if (raw.length < count) return
    start = `(${raw[raw.length - 1]![0]}`
  }
}
