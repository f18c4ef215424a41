import { complianceLogPage, complianceLogSeqBefore, type Db } from '@threadline/db'
import { complianceStreamBody } from '@threadline/domain'
import type { Logger } from '@threadline/logger'
import type { StreamConnection } from '../stream/connection.js'
import {
  isAfterSeq,
  type ComplianceLogPoller,
  type LogKind,
  type LoggedEvent,
} from './log-poller.js'
import { compliancePartition } from './partition.js'

/** Log events read per query of a replay. */
const REPLAY_PAGE = 1_000

/** What a compliance stream follows the log with: one poller per process, shared. */
export interface LogStreamDeps {
  db: Db
  log: Logger
  poller: ComplianceLogPoller
  /** The poller's interval: a stream with an `end_time` ends once a poll past it has run. */
  pollMs: number
  now: () => Date
}

/** What one compliance stream asked for (docs/api.md §8.2). */
export interface LogStreamRequest {
  kind: LogKind
  partition: number
  /** Replay the log by event time from here. */
  start: Date | undefined
  /** Send events up to this event time, then end. */
  end: Date | undefined
  /** Without `start`: replay what was applied in the last minutes first (0: none). */
  backfillMinutes: number
  /** When the request came. */
  now: Date
}

type PartitionFilter = (e: { id: string; eventAt: string }) => boolean

/**
 * Feeds one open compliance stream: its replay first, then every event as the poller reads it,
 * each on the partition its target's id hashes to. Live events wait while the replay runs, and an
 * event both replayed and read live is sent once.
 */
export async function followComplianceLog(
  deps: LogStreamDeps,
  conn: StreamConnection,
  q: LogStreamRequest,
): Promise<void> {
  const { kind, partition, end } = q
  const mine: PartitionFilter = (e) =>
    compliancePartition(e.id) === partition && (!end || new Date(e.eventAt) <= end)
  const send = (e: LoggedEvent) => conn.send(complianceStreamBody(e))

  // Live events wait here while the replay runs; null once live.
  let pending: LoggedEvent[] | null = []
  // What a replay sent above the poller's settled mark: the poller may still read those (a
  // late commit), and they are not sent twice.
  const replayed = new Set<string>()
  const sub = {
    kind,
    deliver(e: LoggedEvent) {
      if (!mine(e)) return
      if (pending) pending.push(e)
      else if (!replayed.has(e.seq)) send(e)
    },
  }
  conn.onClose(() => deps.poller.leave(sub))
  try {
    const { upTo, settled } = await deps.poller.join(sub)
    const sendReplayed = (e: LoggedEvent) => {
      if (isAfterSeq(e.seq, settled)) replayed.add(e.seq)
      return send(e)
    }
    await replayRequested(deps.db, conn, q, { end, upTo, mine, send: sendReplayed })
  } catch (err) {
    // The response is already the stream's: a failure ends it as X's streams end, and the
    // client reconnects (with backfill_minutes) as it would after any disconnect.
    deps.log.warn({ err }, 'compliance stream replay failed; disconnecting')
    conn.disconnect('OperationalDisconnect')
    return
  }
  for (const e of pending) if (!replayed.has(e.seq)) send(e)
  pending = null
  if (end) endAt(conn, end, deps.now(), deps.pollMs)
}

/** How far a replay goes and where what it reads goes. */
interface ReplayBounds {
  end: Date | undefined
  /** The poller's highest seq when the stream joined: what is above it comes live. */
  upTo: string
  mine: PartitionFilter
  send: (e: LoggedEvent) => boolean
}

/**
 * The replay a stream asked for: `start_time` replays by event time, as X's; `backfill_minutes`
 * what was applied (so sent live) in the last minutes, whatever the events' own times (a sweep's
 * are hours old).
 */
async function replayRequested(
  db: Db,
  conn: StreamConnection,
  q: LogStreamRequest,
  bounds: ReplayBounds,
): Promise<void> {
  if (q.start) {
    await replay(db, conn, q.kind, { from: q.start, ...bounds })
  } else if (q.backfillMinutes > 0) {
    const since = new Date(q.now.getTime() - q.backfillMinutes * 60_000)
    const afterSeq = await complianceLogSeqBefore(db, since)
    await replay(db, conn, q.kind, { afterSeq, ...bounds })
  }
}

/** The log from `from` (event time) or after `afterSeq`, up to the poller's `upTo`, in seq order. */
async function replay(
  db: Db,
  conn: StreamConnection,
  kind: LogKind,
  r: ReplayBounds & { from?: Date; afterSeq?: string },
): Promise<void> {
  let afterSeq = r.afterSeq
  for (;;) {
    if (!conn.open) return
    const page = await complianceLogPage(db, {
      kind,
      startTime: r.from?.toISOString(),
      endTime: r.end?.toISOString(),
      afterSeq,
      limit: REPLAY_PAGE,
    })
    for (const e of page) {
      if (isAfterSeq(e.seq, r.upTo)) return
      if (r.mine(e)) r.send(e)
    }
    if (page.length < REPLAY_PAGE) return
    afterSeq = page[page.length - 1]!.seq
  }
}

/** A stream with an `end_time` ends once it has passed (at once when it already has). */
function endAt(conn: StreamConnection, end: Date, now: Date, pollMs: number): void {
  const wait = end.getTime() - now.getTime()
  if (wait <= 0) return conn.end()
  const timer = setTimeout(() => conn.end(), wait + pollMs * 2)
  timer.unref()
  conn.onClose(() => clearTimeout(timer))
}
