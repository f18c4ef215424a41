import type { Redis } from './connection.js'

/** The Redis Stream of what the writer newly stored. */
export function storedStreamKey(prefix: string): string {
  return `${prefix}:stored`
}

export interface StoredEntry {
  type: 'post' | 'user_change'
  id: string
  /** JSON of the stored object: a Post with its `author`, or a user change. */
  body: string
}

/**
 * How many entries one stream entry holds, each as a field `<type>:<id>` whose value is its body:
 * one XADD for a hundred Posts costs Redis far less than one per Post. Readers unpack them
 * (unpackStored).
 */
export const STORED_PACK = 100

/**
 * Appends entries in order, STORED_PACK to a stream entry. The stream is trimmed by time (MINID,
 * approximate so Redis can drop whole nodes), keeping at least `retentionMs` of history for
 * `backfill_minutes` replays.
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
  const appends: Promise<unknown>[] = []
  for (let start = 0; start < entries.length; start += STORED_PACK) {
    const fields = entries
      .slice(start, start + STORED_PACK)
      .flatMap((e) => [`${e.type}:${e.id}`, e.body])
    appends.push(redis.xadd(key, 'MINID', '~', minId, '*', ...fields))
  }
  await Promise.all(appends)
}

/**
 * Trims the stream to `retentionMs` exactly. Appends trim approximately, by whole nodes, and only
 * when something is appended: without this a quiet writer (or an ingest paused for a full Redis,
 * waiting on this very memory) would keep old Posts in Redis for as long as nothing is stored.
 */
export async function trimStored(
  redis: Redis,
  prefix: string,
  retentionMs: number,
): Promise<number> {
  return redis.xtrim(storedStreamKey(prefix), 'MINID', `${Date.now() - retentionMs}-0`)
}

const TYPES: ReadonlySet<string> = new Set<StoredEntry['type']>(['post', 'user_change'])

/**
 * The entries one stream entry holds, in order (see publishStored). A field of another form is
 * left out.
 */
export function unpackStored<T extends string | Buffer>(
  fields: readonly T[],
): Array<{ type: StoredEntry['type']; id: string; body: T }> {
  const out: Array<{ type: StoredEntry['type']; id: string; body: T }> = []
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const key = fields[i]!.toString()
    const colon = key.indexOf(':')
    const type = key.slice(0, colon)
    if (colon > 0 && TYPES.has(type)) {
      out.push({
        type: type as StoredEntry['type'],
        id: key.slice(colon + 1),
        body: fields[i + 1]!,
      })
    }
  }
  return out
}
