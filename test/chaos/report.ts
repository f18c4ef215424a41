import type { MemorySample } from './stack.js'

/** What a fault run found, printed as the summary table (and kept for the closing note). */
export interface FaultResult {
  name: string
  ok: boolean
  /** From the fault until every Post sent before it was stored (or the error). */
  recoveredMs?: number
  /**
   * From the stream (or the faulted service) being back until every Post sent before then was
   * stored: the window closed.
   */
  closeMs?: number
  /** Posts sent (heard or not) from the fault's start until it settled, stored of them, doubled. */
  sent?: number
  stored?: number
  doubled?: number
  detail?: string
}

export interface MemoryRow {
  name: string
  start: MemorySample
  end: MemorySample
  bound?: number
}

export interface ChaosSummary {
  faults: FaultResult[]
  posts?: {
    sent: number
    /** Of `sent`, the Posts no stream heard (made while the ingest was away). */
    unheard: number
    stored: number
    duplicated: number
    lost: number
    rows: number
    /** Posts appended to the `stored` stream more than once (a relay repeat after a crash). */
    republished: number
  }
  requests?: Record<string, number>
  stream?: { posts: number; connects: number }
  /** Activity events for the webhook subscription (when delivery runs). */
  events?: { expected: number; delivered: number; received: number; refused: number }
  memory: MemoryRow[]
}

const mb = (bytes: number | undefined) =>
  bytes === undefined ? '-' : `${(bytes / 1024 / 1024).toFixed(0)} MB`

function table(rows: string[][]): string {
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)))
  return rows.map((r) => r.map((c, i) => c.padEnd(widths[i]!)).join('  ')).join('\n')
}

export function formatSummary(s: ChaosSummary): string {
  const survived = s.faults.filter((f) => f.ok).length
  const out: string[] = [
    '',
    `Threadline chaos suite: ${survived}/${s.faults.length} faults survived`,
    '',
    table([
      ['fault', 'outcome', 'sent', 'stored', 'doubled', 'window closed', 'recovered in', 'detail'],
      ...s.faults.map((f) => [
        f.name,
        f.ok ? 'survived' : 'FAILED',
        f.sent === undefined ? '-' : String(f.sent),
        f.stored === undefined ? '-' : String(f.stored),
        f.doubled === undefined ? '-' : String(f.doubled),
        f.closeMs === undefined ? '-' : `${(f.closeMs / 1000).toFixed(1)} s`,
        f.recoveredMs === undefined ? '-' : `${(f.recoveredMs / 1000).toFixed(1)} s`,
        f.detail ?? '',
      ]),
    ]),
    '',
  ]
  if (s.posts) {
    out.push(
      table([
        [
          'Posts',
          'sent',
          'unheard',
          'stored',
          'duplicated',
          'lost',
          'republished',
          'rows in posts',
        ],
        [
          '',
          String(s.posts.sent),
          String(s.posts.unheard),
          String(s.posts.stored),
          String(s.posts.duplicated),
          String(s.posts.lost),
          String(s.posts.republished),
          `${s.posts.rows} (with backfilled history and included Posts)`,
        ],
      ]),
      '',
    )
  }
  if (s.requests) {
    const keys = Object.keys(s.requests).sort()
    out.push(
      table([
        ['API requests', ...keys, 'total'],
        [
          '',
          ...keys.map((k) => String(s.requests![k])),
          String(Object.values(s.requests).reduce((a, b) => a + b, 0)),
        ],
      ]),
    )
    if (s.stream)
      out.push(
        `stream client: ${s.stream.posts} Posts received over ${s.stream.connects} connection(s)`,
      )
    out.push('')
  }
  if (s.events) {
    out.push(
      `webhook events: ${s.events.delivered}/${s.events.expected} expected delivered ` +
        `(${s.events.received} deliveries received, ${s.events.refused} refused with 503 and retried)`,
      '',
    )
  }
  if (s.memory.length > 0) {
    out.push(
      table([
        ['process', 'rss start', 'rss end', 'bound', 'heap start', 'heap end'],
        ...s.memory.map((m) => [
          m.name,
          mb(m.start.rss),
          mb(m.end.rss),
          mb(m.bound),
          mb(m.start.heapUsed),
          mb(m.end.heapUsed),
        ]),
      ]),
      '',
    )
  }
  return out.join('\n')
}
