import type { Redis } from './connection.js'
import { tailStream, type RawEntries, type StreamTail } from './tail-stream.js'
import type { Logger } from '@threadline/logger'
import { STORED_PACK, storedStreamKey, unpackStored, type StoredEntry } from './stored-stream.js'

/**
 * One Post or user change of the `stored` stream with the id (`<ms>-<seq>`) of the stream entry
 * that holds it (an entry holds up to STORED_PACK), as read back (text).
 */
export interface StoredMessage extends StoredEntry {
  body: string
  streamId: string
}

/** The messages of stream entries, each entry unpacked (see publishStored). */
function toMessages(raw: RawEntries): StoredMessage[] {
  const out: StoredMessage[] = []
  for (const [streamId, fields] of raw) {
    for (const entry of unpackStored(fields)) out.push({ ...entry, streamId })
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
  /** About how many Posts per XREAD (it asks for batch / STORED_PACK entries, at least one). */
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
    count: Math.max(1, Math.ceil(options.batch / STORED_PACK)),
    blockMs: options.blockMs ?? 5_000,
    logger: options.logger,
    onEntries: async (raw) => {
      const messages = toMessages(raw)
      if (messages.length > 0) await options.onMessages(messages)
    },
  })
}

/**
 * Entries from `sinceMs` up to and including `untilId`, in pages of about `posts` (the backfill of
 * a stream connection). Entries already trimmed away are simply absent.
 */
export async function* rangeStored(
  redis: Redis,
  prefix: string,
  sinceMs: number,
  untilId: string,
  posts = 500,
): AsyncGenerator<StoredMessage[]> {
  const key = storedStreamKey(prefix)
  const count = Math.max(1, Math.ceil(posts / STORED_PACK))
  let start = `${Math.max(0, Math.floor(sinceMs))}-0`
  for (;;) {
    const raw = (await redis.xrange(key, start, untilId, 'COUNT', count)) as RawEntries
    if (raw.length === 0) return
    yield toMessages(raw)
    if (raw.length < count) return
    start = `(${raw[raw.length - 1]![0]}`
  }
}
