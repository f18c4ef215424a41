import type { Redis } from './connection.js'
import { scriptCommand } from './script.js'

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

/**
 * Erasing from the `stored` stream: entries are immutable and a pack cannot be rewritten in place
 * (an XADD id must be the newest), so each pack that holds a withdrawn Post is deleted whole.
 * Scanned in Redis, so no Post body travels: ARGV[1], ARGV[2] the id range, then the field names
 * (`post:<id>`) to look for. Returns how many stream entries were deleted.
 */
const ERASE_STORED = `
local wanted = {}
for i = 3, #ARGV do wanted[ARGV[i]] = true end
local gone = 0
local start = ARGV[1]
while true do
  local entries = redis.call('XRANGE', KEYS[1], start, ARGV[2], 'COUNT', 200)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    for j = 1, #fields, 2 do
      if wanted[fields[j]] then
        gone = gone + redis.call('XDEL', KEYS[1], entry[1])
        break
      end
    end
  end
  if #entries < 200 then break end
  start = '(' .. entries[#entries][1]
end
return gone
`

/** Margin around a Post's store time within which its entry was published (the relay included). */
const PUBLISH_WINDOW_MS = 15 * 60_000

/**
 * Removes from the `stored` stream (the `backfill_minutes` replay) every entry that holds one of
 * these Posts, so their content is replayed from nowhere (docs/api.md §7). `storedAt` bounds the
 * scan; Posts stored before the stream's retention are skipped (trimmed already). The other Posts
 * of a deleted pack leave the replay too (see ERASE_STORED). Returns the stream entries deleted.
 */
export async function eraseStoredPosts(
  redis: Redis,
  prefix: string,
  posts: ReadonlyArray<{ id: string; storedAt: Date | string }>,
  retentionMs: number,
): Promise<number> {
  const oldest = Date.now() - retentionMs - PUBLISH_WINDOW_MS
  const times = posts
    .map((p) => ({ id: p.id, ms: new Date(p.storedAt).getTime() }))
    .filter((p) => p.ms >= oldest)
  if (times.length === 0) return 0
  const from = Math.max(0, Math.min(...times.map((p) => p.ms)) - 1_000)
  const to = Math.max(...times.map((p) => p.ms)) + PUBLISH_WINDOW_MS
  const erase = scriptCommand<number>(redis, 'threadlineEraseStored', ERASE_STORED)
  return erase(
    storedStreamKey(prefix),
    `${from}-0`,
    `${to}-18446744073709551615`,
    ...times.map((p) => `post:${p.id}`),
  )
}
