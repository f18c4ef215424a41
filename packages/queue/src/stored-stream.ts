import type { Redis } from './connection.js'
import { scriptCommand } from './script.js'

/** The Redis Stream of what the writer newly stored (design.md §1, step 5). */
export function storedStreamKey(prefix: string): string {
  return `${prefix}:stored`
}

export interface StoredEntry {
  type: 'post' | 'user_change'
  id: string
  /** JSON of the stored object (a Post with `author`, or a user change), as text or UTF-8 bytes. */
  body: string | Buffer
}

/**
 * Appends a batch's entries in one script call (XADD per entry inside it): a pipeline of one XADD
 * per entry cost the writer about twice the CPU, in per-command objects, promises and replies.
 */
const APPEND = `
for i = 2, #ARGV, 3 do
  redis.call('XADD', KEYS[1], 'MINID', '~', ARGV[1], '*',
    'type', ARGV[i], 'id', ARGV[i + 1], 'body', ARGV[i + 2])
end
return (#ARGV - 1) / 3`

/** Entries per script call: bounds how long one call holds Redis (~3 ms per 500 Posts). */
const APPEND_CHUNK = 500

/**
 * Appends entries in order. The stream is trimmed by time (MINID, approximate so Redis can drop
 * whole nodes), keeping at least `retentionMs` of history for `backfill_minutes` replays.
 *
 * Each body goes as its own UTF-8 bytes. Given only strings, ioredis joins a command's arguments
 * into one string before encoding it, and one body with a non-ASCII character (an emoji in a name)
 * made that whole ≈ 1.2 MB command a two-byte string, every ASCII body copied into it and encoded
 * from it the slow way. With a Buffer among them it encodes each argument alone: ≈ 5–8 µs less
 * writer CPU an entry, measured on a stored batch's real Posts (a quarter of them non-ASCII).
 */
export async function publishStored(
  redis: Redis,
  prefix: string,
  entries: readonly StoredEntry[],
  retentionMs: number,
): Promise<void> {
  if (entries.length === 0) return
  const append = scriptCommand<number>(redis, 'threadlineAppendStored', APPEND)
  const key = storedStreamKey(prefix)
  const minId = `${Date.now() - retentionMs}-0`
  for (let start = 0; start < entries.length; start += APPEND_CHUNK) {
    const fields: Array<string | Buffer> = []
    for (const e of entries.slice(start, start + APPEND_CHUNK)) {
      fields.push(e.type, e.id, typeof e.body === 'string' ? Buffer.from(e.body, 'utf8') : e.body)
    }
    await append(key, minId, ...fields)
  }
}
