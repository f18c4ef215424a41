import type { Redis } from './connection.js'

/** The Redis Stream of what the writer newly stored (design.md §1, step 5). */
export function storedStreamKey(prefix: string): string {
  return `${prefix}:stored`
}

export interface StoredEntry {
  type: 'post' | 'user_change'
  id: string
  /** JSON of the stored object (a Post with `author`, or a user change). */
  body: string
}

/**
 * Appends entries in one pipeline. The stream is trimmed by time (MINID, approximate so Redis can
 * drop whole nodes), keeping at least `retentionMs` of history for `backfill_minutes` replays.
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
  for (const e of entries) {
    pipeline.xadd(key, 'MINID', '~', minId, '*', 'type', e.type, 'id', e.id, 'body', e.body)
  }
  const results = await pipeline.exec()
  const failed = results?.find(([err]) => err)
  if (failed) throw failed[0]
}
