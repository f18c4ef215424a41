import type { Redis } from './connection.js'
import { tailStream, type RawEntries, type StreamTail } from './tail-stream.js'
import type { Logger } from '@threadline/logger'
import { storedStreamKey, type StoredEntry } from './stored-stream.js'

/** One entry of the `stored` stream with its stream id (`<ms>-<seq>`), as read back (text). */
export interface StoredMessage extends StoredEntry {
  body: string
  streamId: string
}

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

export type StoredReader = StreamTail

/** Follows the `stored` stream from its tail (see tailStream), a batch at a time. */
export function readStored(redis: Redis, options: StoredReaderOptions): StoredReader {
  return tailStream(redis, storedStreamKey(options.prefix), {
    name: 'stored-reader',
    count: options.batch,
    blockMs: options.blockMs ?? 5_000,
    logger: options.logger,
    onEntries: async (raw) => {
      const messages = toMessages(raw)
      if (messages.length > 0) await options.onMessages(messages)
    },
  })
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
