import { sql, type Kysely } from 'kysely'
import { snowflakeAt, snowflakeTime } from '@threadline/domain'

/**
 * The tables partitioned by range of a snowflake id (docs/capacity.md §2), and the column each is
 * partitioned on. A conversation's id is its root Post's id, so all three are time-ordered.
 */
export const PARTITIONED_TABLES = {
  posts: 'id',
  post_references: 'post_id',
  conversations: 'id',
} as const
export type PartitionedTable = keyof typeof PARTITIONED_TABLES

/** Ids below this predate snowflakes; they all go in `<table>_legacy`. */
export const FIRST_SNOWFLAKE_ID = '29700859247'
/** How many days ahead the maintenance job keeps partitions ready. */
export const DAYS_AHEAD = 7
const DAY_MS = 86_400_000

// A partitioned parent takes no storage parameters: each partition of conversations gets the
// fillfactor that keeps the writer's counter updates HOT (see the conversation-counters migration).
const PARTITION_STORAGE: Partial<Record<PartitionedTable, string>> = {
  conversations: 'WITH (fillfactor = 70)',
}

/** One partition: ids in [from, to); `from` undefined is MINVALUE. */
export interface PartitionRange {
  name: string
  from?: string
  to: string
}

const utcDay = (date: Date) =>
  new Date(Date.UTC(date.getUTCFullYear(), date.getUTCMonth(), date.getUTCDate()))
const addDays = (date: Date, days: number) => new Date(date.getTime() + days * DAY_MS)
const stamp = (date: Date) => date.toISOString().slice(0, 10).replaceAll('-', '')

/** A partition's name: the table and the UTC day its range starts on. */
export function partitionName(table: PartitionedTable, start: Date): string {
  return `${table}_p${stamp(start)}`
}

/** Daily partitions from `start` (a UTC midnight) up to, not including, `end`. */
export function dailyRanges(table: PartitionedTable, start: Date, end: Date): PartitionRange[] {
  const out: PartitionRange[] = []
  for (let day = start; day < end; day = addDays(day, 1)) {
    out.push({
      name: partitionName(table, day),
      from: snowflakeAt(day),
      to: snowflakeAt(addDays(day, 1)),
    })
  }
  return out
}

/**
 * The layout of a new store at `now`: pre-snowflake ids in one partition, a partition a year up to
 * the current year, the current year up to yesterday in one, then a partition a day from yesterday
 * to DAYS_AHEAD days ahead. Coarse old ranges keep a new store (and each test schema) small; the
 * maintenance job adds days from there.
 */
export function initialLayout(table: PartitionedTable, now: Date): PartitionRange[] {
  const yesterday = addDays(utcDay(now), -1)
  const out: PartitionRange[] = [{ name: `${table}_legacy`, to: FIRST_SNOWFLAKE_ID }]
  let from = FIRST_SNOWFLAKE_ID
  let start = new Date(Date.UTC(2010, 10, 4))
  for (let year = 2011; year <= yesterday.getUTCFullYear(); year++) {
    const end = new Date(Date.UTC(year, 0, 1))
    out.push({ name: partitionName(table, start), from, to: snowflakeAt(end) })
    from = snowflakeAt(end)
    start = end
  }
  if (start < yesterday) {
    out.push({ name: partitionName(table, start), from, to: snowflakeAt(yesterday) })
  }
  return [...out, ...dailyRanges(table, yesterday, addDays(utcDay(now), DAYS_AHEAD + 1))]
}

/** Whether `table` (in the current schema) is partitioned. */
export async function isPartitioned(db: Kysely<any>, table: string): Promise<boolean> {
  const { rows } = await sql<{ partitioned: boolean }>`
    SELECT c.relkind = 'p' AS partitioned FROM pg_class c
    WHERE c.oid = to_regclass(${table})`.execute(db)
  return rows[0]?.partitioned ?? false
}

/** The partitions of `table`, oldest first, with their bounds read back from the catalog. */
export async function listPartitions(
  db: Kysely<any>,
  table: PartitionedTable,
): Promise<PartitionRange[]> {
  const { rows } = await sql<{ name: string; bound: string }>`
    SELECT c.relname AS name, pg_get_expr(c.relpartbound, c.oid) AS bound
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = to_regclass(${table})`.execute(db)
  const ranges = rows.map(({ name, bound }) => {
    const m = /FROM \((MINVALUE|'?-?\d+'?)\) TO \((MAXVALUE|'?-?\d+'?)\)/.exec(bound)
    if (!m) throw new Error(`partition ${name} of ${table} has an unexpected bound: ${bound}`)
    const value = (v: string) => v.replaceAll("'", '')
    return { name, from: m[1] === 'MINVALUE' ? undefined : value(m[1]!), to: value(m[2]!) }
  })
  const key = (r: PartitionRange) => (r.from === undefined ? -1n : BigInt(r.from))
  return ranges.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0))
}

/** Creates one partition of `table` (or of `parent`, its replacement being built) unless one of that name exists. */
export async function createPartition(
  db: Kysely<any>,
  table: PartitionedTable,
  range: PartitionRange,
  parent: string = table,
): Promise<void> {
  const from = range.from === undefined ? sql`MINVALUE` : sql.lit(range.from)
  const storage = sql.raw(PARTITION_STORAGE[table] ?? '')
  await sql`CREATE TABLE IF NOT EXISTS ${sql.id(range.name)} PARTITION OF ${sql.id(parent)}
    FOR VALUES FROM (${from}) TO (${sql.lit(range.to)}) ${storage}`.execute(db)
}

/**
 * Makes sure every table has partitions up to DAYS_AHEAD days after `now`, continuing from its
 * newest partition: one partition covers a gap older than yesterday (a store left idle), then a
 * partition a day. Returns the names created. Tables not (yet) partitioned are left alone.
 */
export async function createPartitionsAhead(db: Kysely<any>, now: Date): Promise<string[]> {
  const created: string[] = []
  const yesterday = addDays(utcDay(now), -1)
  const until = addDays(utcDay(now), DAYS_AHEAD + 1)
  for (const table of Object.keys(PARTITIONED_TABLES) as PartitionedTable[]) {
    if (!(await isPartitioned(db, table))) continue
    const newest = (await listPartitions(db, table)).at(-1)
    if (!newest) continue
    let start = snowflakeTime(newest.to) ?? yesterday
    const wanted: PartitionRange[] = []
    if (start < yesterday) {
      wanted.push({
        name: partitionName(table, start),
        from: newest.to,
        to: snowflakeAt(yesterday),
      })
      start = yesterday
    }
    for (const range of dailyRanges(table, start, until)) {
      // The first day continues exactly where the newest partition ends, wherever that is.
      wanted.push(wanted.length === 0 ? { ...range, from: newest.to } : range)
    }
    for (const range of wanted) {
      await createPartition(db, table, range)
      created.push(range.name)
    }
  }
  return created
}

/**
 * Detaches (CONCURRENTLY: inserts into other partitions go on) and drops every partition whose
 * ids are all older than `retentionDays` before `now`. Never a DELETE: a whole partition goes at
 * once. Returns the names dropped. A detach interrupted half way is finished first.
 */
export async function expirePartitions(
  db: Kysely<any>,
  now: Date,
  retentionDays: number,
): Promise<string[]> {
  const horizon = BigInt(snowflakeAt(new Date(now.getTime() - retentionDays * DAY_MS)))
  const dropped: string[] = []
  for (const table of Object.keys(PARTITIONED_TABLES) as PartitionedTable[]) {
    if (!(await isPartitioned(db, table))) continue
    for (const range of await listPartitions(db, table)) {
      if (BigInt(range.to) > horizon) break
      await detachAndDrop(db, table, range.name)
      dropped.push(range.name)
    }
  }
  return dropped
}

async function detachAndDrop(db: Kysely<any>, table: string, name: string): Promise<void> {
  try {
    await sql`ALTER TABLE ${sql.id(table)} DETACH PARTITION ${sql.id(name)} CONCURRENTLY`.execute(
      db,
    )
  } catch (err) {
    // 55000: a previous detach was cancelled half way; it must be finished before anything else.
    if ((err as { code?: string }).code !== '55000') throw err
    await sql`ALTER TABLE ${sql.id(table)} DETACH PARTITION ${sql.id(name)} FINALIZE`.execute(db)
  }
  await sql`DROP TABLE ${sql.id(name)}`.execute(db)
}

/** "no partition of relation … found for row" (SQLSTATE 23514): a day not created yet, not bad data. */
export function isMissingPartition(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown } | null
  return (
    e?.code === '23514' &&
    typeof e.message === 'string' &&
    e.message.startsWith('no partition of relation')
  )
}

export interface MaintenanceResult {
  created: string[]
  dropped: string[]
}

/** One maintenance pass: partitions ahead, then expiry when `retentionDays` is set. */
export async function maintainPartitions(
  db: Kysely<any>,
  now: Date,
  retentionDays?: number,
): Promise<MaintenanceResult> {
  const created = await createPartitionsAhead(db, now)
  const dropped = retentionDays ? await expirePartitions(db, now, retentionDays) : []
  return { created, dropped }
}
