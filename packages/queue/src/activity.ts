import type { Queue } from 'bullmq'
import {
  scriptCommand,
  throwFirstError,
  type Redis,
  tailStream,
  type RawEntries,
  type StreamTail,
} from '@threadline/redis'
import { z } from 'zod'
import type { Logger } from '@threadline/logger'
import { createQueue } from './queues.js'

/** What a relayed outbox batch newly stored: the delivery service turns it into events. */
export const activityJobSchema = z.object({
  post_ids: z.array(z.string().regex(/^\d{1,19}$/)),
  user_changes: z.array(
    z.object({
      id: z.string().regex(/^\d{1,19}$/),
      before: z.object({ name: z.string(), username: z.string() }),
      after: z.object({ name: z.string(), username: z.string() }),
    }),
  ),
})
export type ActivityJob = z.infer<typeof activityJobSchema>

/** "Send what is queued for this webhook": the queue itself lives in Postgres, in order. */
export const webhooksJobSchema = z.object({ webhook_id: z.string().regex(/^\d{1,19}$/) })
export type WebhooksJob = z.infer<typeof webhooksJobSchema>

export function createActivityQueue(
  redis: Redis,
  prefix: string,
  logger: Logger,
): Queue<ActivityJob> {
  return createQueue<ActivityJob>('activity', { connection: redis, prefix, logger })
}

/**
 * Enqueues the activity of relayed outbox payloads as one job (the writer's relay calls this after
 * commit, before deleting the rows: a crash in between enqueues again, and delivery fires once).
 */
export async function enqueueActivity(
  queue: Queue<ActivityJob>,
  payloads: ReadonlyArray<ActivityJob>,
): Promise<void> {
  const job: ActivityJob = {
    post_ids: payloads.flatMap((p) => p.post_ids),
    user_changes: payloads.flatMap((p) => p.user_changes),
  }
  if (job.post_ids.length === 0 && job.user_changes.length === 0) return
  await queue.add('activity', job)
}

/** Asks for a webhook to be drained; coalesced with a drain already waiting for it. */
export async function enqueueWebhookDrain(
  queue: Queue<WebhooksJob>,
  webhookIds: readonly string[],
  delayMs = 0,
): Promise<void> {
  if (webhookIds.length === 0) return
  await queue.addBulk(
    webhookIds.map((id) => ({
      name: 'drain',
      data: { webhook_id: id },
      // A delayed drain (a retry after backoff) is not coalesced: it must wake at its time. One
      // asked for while a drain runs is kept for when it ends: that drain may have looked for
      // events already, and the event would otherwise wait for the delivery's sweep.
      opts:
        delayMs > 0
          ? { delay: delayMs }
          : { deduplication: { id: `wh-${id}`, keepLastIfActive: true } },
    })),
  )
}

// --- the activity event stream: delivery → every API instance (docs/api.md §4.2 GET /2/activity/stream)

export function activityStreamKey(prefix: string): string {
  return `${prefix}:activity`
}

export interface ActivityEntry {
  app_id: string
  /** The framed event line (JSON, without its `\r\n`). */
  body: string
}

/** Appends events in one pipeline, trimmed by time like the `stored` stream. */
export async function publishActivity(
  redis: Redis,
  prefix: string,
  entries: readonly ActivityEntry[],
  retentionMs: number,
): Promise<void> {
  if (entries.length === 0) return
  const key = activityStreamKey(prefix)
  const minId = `${Date.now() - retentionMs}-0`
  const pipeline = redis.pipeline()
  for (const e of entries) {
    pipeline.xadd(key, 'MINID', '~', minId, '*', 'app', e.app_id, 'body', e.body)
  }
  throwFirstError((await pipeline.exec()) ?? [])
}

function toEntries(raw: RawEntries): Array<ActivityEntry & { streamId: string }> {
  const out: Array<ActivityEntry & { streamId: string }> = []
  for (const [streamId, fields] of raw) {
    let app: string | undefined
    let body: string | undefined
    for (let i = 0; i + 1 < fields.length; i += 2) {
      if (fields[i] === 'app') app = fields[i + 1]
      else if (fields[i] === 'body') body = fields[i + 1]
    }
    if (app !== undefined && body !== undefined) out.push({ streamId, app_id: app, body })
  }
  return out
}

export type ActivityReader = Pick<StreamTail, 'ready' | 'close'>

/** Follows the activity stream from its tail (see tailStream). */
export function readActivity(
  redis: Redis,
  prefix: string,
  onEntries: (entries: ActivityEntry[]) => void,
  { blockMs = 2_000, logger }: { blockMs?: number; logger?: Logger } = {},
): ActivityReader {
  return tailStream(redis, activityStreamKey(prefix), {
    name: 'activity-reader',
    count: 1000,
    blockMs,
    logger,
    onEntries: (raw) => onEntries(toEntries(raw)),
  })
}

/**
 * Deleting from the activity stream the events that carry a Post X withdrew: ARGV[1] the first
 * stream id, then the texts to look for in an event's body. Scanned in Redis, so no body travels.
 * Returns how many events were deleted.
 */
const ERASE_ACTIVITY = `
local gone = 0
local start = ARGV[1]
while true do
  local entries = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', 500)
  if #entries == 0 then break end
  for _, entry in ipairs(entries) do
    local fields = entry[2]
    for j = 1, #fields, 2 do
      if fields[j] == 'body' then
        for k = 2, #ARGV do
          if string.find(fields[j + 1], ARGV[k], 1, true) then
            gone = gone + redis.call('XDEL', KEYS[1], entry[1])
            break
          end
        end
      end
    end
  end
  if #entries < 500 then break end
  start = '(' .. entries[#entries][1]
end
return gone
`

/**
 * Removes from the activity stream (what `backfill_minutes` replays to activity streams) every
 * event that carries one of these Posts (docs/api.md §7). Posts stored before the stream's
 * retention are skipped; the scan starts at the oldest one's store time.
 */
export async function eraseActivityPosts(
  redis: Redis,
  prefix: string,
  posts: ReadonlyArray<{ id: string; storedAt: Date | string }>,
  retentionMs: number,
): Promise<number> {
  const oldest = Date.now() - retentionMs
  const kept = posts.filter((p) => new Date(p.storedAt).getTime() >= oldest - 60_000)
  if (kept.length === 0) return 0
  const from = Math.max(0, Math.min(...kept.map((p) => new Date(p.storedAt).getTime())) - 1_000)
  const erase = scriptCommand<number>(redis, 'threadlineEraseActivity', ERASE_ACTIVITY)
  return erase(activityStreamKey(prefix), `${from}-0`, ...kept.map((p) => `"id":"${p.id}"`))
}
