import { sql, type Kysely } from 'kysely'

// posts, post_references and conversations partitioned by range of their snowflake id, a
// partition a day for recent time (docs/capacity.md §2). Only an EMPTY store is converted here, in
// the migration's transaction: a store with rows stays as it is, and `threadline migrate` converts
// it online afterwards (docs/deployment.md). Each table keeps its columns, constraints and index
// names (whatever earlier migrations made of them); the maintenance job adds days from here.
const TABLES = [
  ['posts', 'id'],
  ['post_references', 'post_id'],
  ['conversations', 'id'],
] as const

const TWEPOCH = 1288834974657n
const FIRST_SNOWFLAKE = '29700859247'
const DAY_MS = 86_400_000
const DAYS_AHEAD = 7
const snowflakeAt = (ms: number) => ((BigInt(ms) - TWEPOCH) << 22n).toString()
const stamp = (ms: number) => new Date(ms).toISOString().slice(0, 10).replaceAll('-', '')

/** Pre-snowflake ids; a partition a year; this year up to yesterday; then a day a partition. */
function layout(table: string, nowMs: number): Array<{ name: string; from?: string; to: string }> {
  const today = Math.floor(nowMs / DAY_MS) * DAY_MS
  const yesterday = today - DAY_MS
  const out: Array<{ name: string; from?: string; to: string }> = [
    { name: `${table}_legacy`, to: FIRST_SNOWFLAKE },
  ]
  let start = Date.UTC(2010, 10, 4)
  let from = FIRST_SNOWFLAKE
  const cut = (end: number) => {
    out.push({ name: `${table}_p${stamp(start)}`, from, to: snowflakeAt(end) })
    from = snowflakeAt(end)
    start = end
  }
  for (let year = 2011; year <= new Date(yesterday).getUTCFullYear(); year++) {
    cut(Date.UTC(year, 0, 1))
  }
  if (start < yesterday) cut(yesterday)
  while (start < today + (DAYS_AHEAD + 1) * DAY_MS) cut(start + DAY_MS)
  return out
}

async function isEmpty(db: Kysely<any>): Promise<boolean> {
  for (const [table] of TABLES) {
    const { rows } = await sql<{ any: boolean }>`
      SELECT EXISTS (SELECT 1 FROM ${sql.id(table)}) AS any`.execute(db)
    if (rows[0]!.any) return false
  }
  return true
}

async function isPartitioned(db: Kysely<any>, table: string): Promise<boolean> {
  const { rows } = await sql<{ kind: string }>`
    SELECT relkind AS kind FROM pg_class WHERE oid = to_regclass(${table})`.execute(db)
  return rows[0]?.kind === 'p'
}

/**
 * Rebuilds an empty `table` as partitioned (or back, with `partitionKey` undefined): same columns,
 * defaults and checks, the same primary key and index names.
 */
async function rebuild(db: Kysely<any>, table: string, partitionKey?: string): Promise<void> {
  const { rows: indexes } = await sql<{ def: string; primary: boolean }>`
    SELECT pg_get_indexdef(i.indexrelid) AS def, i.indisprimary AS primary
    FROM pg_index i WHERE i.indrelid = to_regclass(${table})`.execute(db)
  const { rows: keys } = await sql<{ name: string; def: string }>`
    SELECT conname AS name, pg_get_constraintdef(oid) AS def FROM pg_constraint
    WHERE conrelid = to_regclass(${table}) AND contype = 'p'`.execute(db)
  const old = `${table}_unpartitioned`
  await sql`ALTER TABLE ${sql.id(table)} RENAME TO ${sql.id(old)}`.execute(db)
  const by = partitionKey ? sql`PARTITION BY RANGE (${sql.id(partitionKey)})` : sql``
  await sql`CREATE TABLE ${sql.id(table)}
    (LIKE ${sql.id(old)} INCLUDING ALL EXCLUDING INDEXES) ${by}`.execute(db)
  await sql`DROP TABLE ${sql.id(old)}`.execute(db)
  for (const key of keys) {
    await sql`ALTER TABLE ${sql.id(table)} ADD CONSTRAINT ${sql.id(key.name)} ${sql.raw(key.def)}`.execute(
      db,
    )
  }
  for (const index of indexes.filter((i) => !i.primary)) {
    const def = index.def.replace(/ ON (ONLY )?\S+ USING /, ` ON "${table}" USING `)
    await sql.raw(def).execute(db)
  }
}

export async function up(db: Kysely<any>): Promise<void> {
  if (await isPartitioned(db, 'posts')) return
  if (!(await isEmpty(db))) return
  const now = Date.now()
  for (const [table, key] of TABLES) {
    await rebuild(db, table, key)
    const storage = table === 'conversations' ? sql`WITH (fillfactor = 70)` : sql``
    for (const range of layout(table, now)) {
      const from = range.from === undefined ? sql`MINVALUE` : sql.lit(range.from)
      await sql`CREATE TABLE ${sql.id(range.name)} PARTITION OF ${sql.id(table)}
        FOR VALUES FROM (${from}) TO (${sql.lit(range.to)}) ${storage}`.execute(db)
    }
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  if (!(await isPartitioned(db, 'posts')) || !(await isEmpty(db))) return
  for (const [table] of TABLES) await rebuild(db, table)
  await sql`ALTER TABLE conversations SET (fillfactor = 70)`.execute(db)
}
