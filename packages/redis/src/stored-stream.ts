import type { Redis } from './connection.js'
import { PreparedCommand, sendPrepared, type PreparedArg } from './prepared-command.js'

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

/** An entry to append: its body as text, as UTF-8 bytes, or as bytes in parts (sent as one). */
export interface OutgoingEntry extends Omit<StoredEntry, 'body'> {
  body: PreparedArg
}

/**
 * Appends entries in order, STORED_PACK to a stream entry, one `XADD` each, sent back to back on
 * one connection. The stream is trimmed by time (MINID, approximate so Redis can drop whole
 * nodes), keeping at least `retentionMs` of history for `backfill_minutes` replays.
 *
 * Each `XADD`'s request is made in one buffer (PreparedCommand) with every body copied into it
 * once: a body given in parts (the writer's `{"data":…,"author":…}` around the bytes it already
 * holds) is never joined on its own first. Through ioredis's own arguments, every body was copied
 * into each command's buffer and the commands into a pipeline's (as strings, one non-ASCII body
 * had made the whole request a two-byte string). Publishing a batch of 500 Posts (bodies of ≈ 1.2
 * KB), alternating with the pipeline of ioredis arguments: 5.7–5.9 → 3.7 µs of writer CPU a Post.
 */
export async function publishStored(
  redis: Redis,
  prefix: string,
  entries: readonly OutgoingEntry[],
  retentionMs: number,
): Promise<void> {
  if (entries.length === 0) return
  const key = storedStreamKey(prefix)
  const minId = `${Date.now() - retentionMs}-0`
  const appends: Promise<unknown>[] = []
  for (let start = 0; start < entries.length; start += STORED_PACK) {
    const args: PreparedArg[] = [key, 'MINID', '~', minId, '*']
    for (const e of entries.slice(start, start + STORED_PACK))
      args.push(`${e.type}:${e.id}`, e.body)
    appends.push(sendPrepared(redis, new PreparedCommand('xadd', args)))
  }
  await Promise.all(appends)
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
