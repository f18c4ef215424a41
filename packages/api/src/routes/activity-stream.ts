import type { FastifyInstance } from 'fastify'
import { withdrawnAmong, type Db } from '@threadline/db'
import { isId } from '@threadline/domain'
import { activityStreamKey, readActivity, type ActivityReader } from '@threadline/queue'
import { createConnectionSlots, type Redis } from '@threadline/redis'
import type { ActivityApiOptions } from '../activity/options.js'
import { ACTIVITY_STREAM_PARAMS } from '../specs.js'
import { StreamRegistry, type StreamConnection } from '../stream/connection.js'
import type { ServerContext } from '../types.js'
import { addRoute, type Endpoint } from './route.js'

export const ACTIVITY_STREAM = {
  method: 'GET',
  url: '/2/activity/stream',
  name: 'activity-stream',
  group: 'rules',
  params: ACTIVITY_STREAM_PARAMS,
  summary: 'Activity events as they happen',
} as const satisfies Endpoint<typeof ACTIVITY_STREAM_PARAMS>

/**
 * The activity stream (docs/api.md §4.2): events fanned out from the delivery service, each to the
 * open connections of its app.
 */
export function registerActivityStreamRoute(
  app: FastifyInstance,
  ctx: ServerContext,
  deps: { redis: Redis; prefix: string; options: ActivityApiOptions },
): void {
  const { log } = ctx
  const { options } = deps
  const slots = createConnectionSlots(deps.redis, { prefix: deps.prefix, logger: log })
  const registry = new StreamRegistry({
    kind: 'activity',
    maxPerApp: options.streamMaxConnections,
    keepAliveMs: options.keepAliveMs,
    maxBufferedBytes: options.maxBufferedBytes,
    slots,
    logger: log,
  })
  /** Connections still replaying their backfill hold live events until it is sent. */
  const held = new Map<StreamConnection, string[]>()
  /**
   * What a connection's backfill sent, while the live reader may still be behind it (the reader
   * follows every app's events and can lag in a burst): live events found here were sent already.
   * The reader hands an app's events over in stream order, so the first one not found here is
   * past the backfill, and the set is dropped.
   */
  const replayed = new Map<StreamConnection, Set<string>>()
  const sendLive = (conn: StreamConnection, body: string) => {
    const sent = replayed.get(conn)
    if (sent) {
      if (sent.has(body)) return
      replayed.delete(conn)
    }
    conn.send(body)
  }
  let reader: ActivityReader | undefined
  const ensureReader = async () => {
    reader ??= readActivity(
      deps.redis,
      deps.prefix,
      (entries) => {
        for (const e of entries) {
          for (const conn of registry.connections(e.app_id)) {
            const pending = held.get(conn)
            if (pending) pending.push(e.body)
            else sendLive(conn, e.body)
          }
        }
      },
      { logger: log },
    )
    await reader.ready
  }
  app.addHook('preClose', async () => {
    await registry.closeAll()
  })
  app.addHook('onClose', async () => {
    slots.close()
    await reader?.close()
  })

  addRoute(app, ctx, ACTIVITY_STREAM, async (c) => {
    const appId = c.client.app_id
    const backfill = c.params.backfill_minutes ?? 0
    await ensureReader()
    const conn = await registry.open(c.reply, appId)
    if (backfill > 0) {
      held.set(conn, [])
      conn.onClose(() => {
        held.delete(conn)
        replayed.delete(conn)
      })
      try {
        const past = await withoutWithdrawn(
          ctx.readDb,
          await backfillActivity(deps.redis, deps.prefix, appId, backfill * 60_000),
        )
        for (const body of past) if (!conn.send(body)) break
        // Live events published during the read, or still behind a lagging reader, are in
        // the window too: each is sent once.
        if (conn.open && past.length > 0) replayed.set(conn, new Set(past))
      } catch (err) {
        log.warn({ err }, 'activity backfill failed; continuing live')
      }
      const pending = held.get(conn) ?? []
      held.delete(conn)
      for (const body of pending) sendLive(conn, body)
    }
    return undefined
  })
}

/** The Post an event line carries (`data.payload.id` of a Post event), if any. */
function postOf(body: string): string | undefined {
  try {
    const parsed = JSON.parse(body) as {
      data?: { event_type?: unknown; payload?: { id?: unknown } }
    }
    const type = parsed.data?.event_type
    const id = parsed.data?.payload?.id
    return typeof type === 'string' && type.startsWith('post.') && isId(id) ? id : undefined
  } catch {
    return undefined
  }
}

/** A replay never carries a Post X withdrew since its event was published (docs/api.md §7). */
export async function withoutWithdrawn(db: Db, bodies: string[]): Promise<string[]> {
  const posts = bodies.map(postOf)
  const ids = [...new Set(posts.flatMap((id) => (id ? [id] : [])))]
  if (ids.length === 0) return bodies
  const withdrawn = new Set((await withdrawnAmong(db, 'tweet', ids)).map((w) => w.id))
  return bodies.filter((_, i) => !withdrawn.has(posts[i] ?? ''))
}

/**
 * One app's event lines of the last `sinceMs`, oldest first. The activity stream holds every app's
 * events, so the window is read page by page to its end: a single capped read would stop inside a
 * busy window and leave a gap before the live events (which are held from just before this read).
 * Past `limit` lines for the app, the oldest are dropped, keeping the replay contiguous with live.
 */
export async function backfillActivity(
  redis: Redis,
  prefix: string,
  appId: string,
  sinceMs: number,
  { page = 2_000, limit = 10_000 }: { page?: number; limit?: number } = {},
): Promise<string[]> {
  const key = activityStreamKey(prefix)
  const out: string[] = []
  let start = `${Date.now() - sinceMs}-0`
  for (;;) {
    const raw = await redis.xrange(key, start, '+', 'COUNT', page)
    for (const [, fields] of raw) {
      let app: string | undefined
      let body: string | undefined
      for (let i = 0; i + 1 < fields.length; i += 2) {
        if (fields[i] === 'app') app = fields[i + 1]
        else if (fields[i] === 'body') body = fields[i + 1]
      }
      if (app === appId && body !== undefined) out.push(body)
    }
    if (out.length > limit) out.splice(0, out.length - limit)
    if (raw.length < page) return out
    start = `(${raw[raw.length - 1]![0]}`
  }
}
