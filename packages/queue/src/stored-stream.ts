import type { Redis } from './connection.js'

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
 * Entries packed into one stream entry. A stream entry holds many of them, each as one field,
 * `<type>:<id>`, whose value is the body: one `XADD` of 100 bodies cost Redis ≈ 4–5 µs a Post,
 * against ≈ 11–12 µs for an `XADD` per Post from a Lua loop (each body copied into Lua and back),
 * and two arguments a Post cost the writer less than six. Readers unpack them (unpackStored).
 */
export const STORED_PACK = 100

/**
 * Appends entries in order, STORED_PACK to a stream entry, in one pipeline. The stream is trimmed
 * by time (MINID, approximate so Redis can drop whole nodes), keeping at least `retentionMs` of
 * history for `backfill_minutes` replays.
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
  const key = storedStreamKey(prefix)
  const minId = `${Date.now() - retentionMs}-0`
  const pipeline = redis.pipeline()
  for (let start = 0; start < entries.length; start += STORED_PACK) {
    const fields: Array<string | Buffer> = []
    for (const e of entries.slice(start, start + STORED_PACK)) {
      fields.push(`${e.type}:${e.id}`, typeof e.body === 'string' ? Buffer.from(e.body) : e.body)
    }
    pipeline.xadd(key, 'MINID', '~', minId, '*', ...fields)
  }
  const results = (await pipeline.exec()) ?? []
  for (const [err] of results) if (err) throw err
}

const TYPES: ReadonlySet<string> = new Set<StoredEntry['type']>(['post', 'user_change'])

/**
 * The entries one stream entry holds, in order: `<type>:<id>` fields with their bodies (see
 * publishStored), or the (type, id, body) fields of an entry written one Post at a time before
 * packing. A field of neither form, or an incomplete triple, is left out.
 */
export function unpackStored<T extends string | Buffer>(
  fields: readonly T[],
): Array<{ type: StoredEntry['type']; id: string; body: T }> {
  const out: Array<{ type: StoredEntry['type']; id: string; body: T }> = []
  let type: string | undefined
  let id: string | undefined
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const key = fields[i]!.toString()
    const value = fields[i + 1]!
    const colon = key.indexOf(':')
    if (colon > 0 && TYPES.has(key.slice(0, colon))) {
      out.push({
        type: key.slice(0, colon) as StoredEntry['type'],
        id: key.slice(colon + 1),
        body: value,
      })
    } else if (key === 'type') {
      type = value.toString()
      id = undefined
    } else if (key === 'id') id = value.toString()
    else if (key === 'body' && type !== undefined && TYPES.has(type) && id !== undefined) {
      out.push({ type: type as StoredEntry['type'], id, body: value })
      type = id = undefined
    }
  }
  return out
}
