import type { ServerResponse } from 'node:http'
import { complianceStreamBody } from '@threadline/domain'
import type { WithdrawalEvent, Withdrawals } from './world-withdrawals.js'

const CRLF = '\r\n'

/** X's compliance streams are split in four partitions; an id's partition is fixed. */
export const COMPLIANCE_PARTITIONS = 4

/** The partition (1–4) an id's events are sent on. */
export function partitionOf(id: string): number {
  return Number(BigInt(id) % BigInt(COMPLIANCE_PARTITIONS)) + 1
}

/** X's line for an event: `{"data":{"delete":{"tweet":{…},"event_at":…}}}` and the rest. */
export function complianceLine(e: WithdrawalEvent): string {
  const body = complianceStreamBody({ ...e, receivedAt: e.eventAt, source: 'stream' })
  return JSON.stringify(body) + CRLF
}

interface ComplianceConnection {
  res: ServerResponse
  kind: 'tweet' | 'user'
  partition: number
  endMs: number
  lastWriteMs: number
}

/**
 * Open compliance-stream connections (`/2/tweets/compliance/stream`, `/2/users/compliance/stream`):
 * each gets its partition's events as the world makes them, after its replay, and a keep-alive
 * when idle.
 */
export class ComplianceHub {
  private readonly connections = new Set<ComplianceConnection>()
  private readonly timer: NodeJS.Timeout
  private readonly off: () => void
  /** Lines written, by kind (what a test or benchmark waits for). */
  sent = { tweet: 0, user: 0 }

  constructor(
    withdrawals: Withdrawals,
    private readonly keepAliveMs: number,
  ) {
    this.off = withdrawals.onEvent((e) => this.deliver(e))
    this.timer = setInterval(() => this.tick(), Math.max(5, Math.floor(keepAliveMs / 4)))
    this.timer.unref()
  }

  get size(): number {
    return this.connections.size
  }

  /** Takes over a 200 response: writes the replay, then live events until `endMs`. */
  open(
    res: ServerResponse,
    kind: 'tweet' | 'user',
    partition: number,
    replay: readonly WithdrawalEvent[],
    endMs = Infinity,
  ): void {
    const conn = { res, kind, partition, endMs, lastWriteMs: Date.now() }
    this.connections.add(conn)
    res.on('close', () => this.connections.delete(conn))
    const lines = replay.filter((e) => partitionOf(e.id) === partition).map(complianceLine)
    if (lines.length > 0) this.write(conn, lines.join(''))
    if (Date.now() >= endMs) this.end(conn)
  }

  private write(conn: ComplianceConnection, text: string): void {
    conn.lastWriteMs = Date.now()
    conn.res.write(text)
  }

  private end(conn: ComplianceConnection): void {
    this.connections.delete(conn)
    conn.res.end()
  }

  private deliver(e: WithdrawalEvent): void {
    let line: string | undefined
    for (const conn of this.connections) {
      if (conn.kind !== e.kind || partitionOf(e.id) !== conn.partition) continue
      line ??= complianceLine(e)
      this.write(conn, line)
      this.sent[e.kind]++
    }
  }

  private tick(): void {
    const now = Date.now()
    for (const conn of [...this.connections]) {
      if (now >= conn.endMs) this.end(conn)
      else if (now - conn.lastWriteMs >= this.keepAliveMs) this.write(conn, CRLF)
    }
  }

  /** Ends every connection abruptly (a fault: the client must reconnect and replay). */
  drop(): number {
    const n = this.connections.size
    for (const conn of [...this.connections]) {
      this.connections.delete(conn)
      conn.res.socket?.destroy()
      conn.res.destroy()
    }
    return n
  }

  close(): void {
    clearInterval(this.timer)
    this.off()
    for (const conn of [...this.connections]) this.end(conn)
  }
}
