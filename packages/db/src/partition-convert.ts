import { sql, type Kysely } from 'kysely'
import {
  createPartition,
  initialLayout,
  isPartitioned,
  PARTITIONED_TABLES,
  type PartitionedTable,
} from './partitions.js'

/**
 * Converts an unpartitioned store (one made before partitioning, which the migration leaves as
 * it is) into the partitioned layout online (docs/deployment.md, "Partitioning an existing
 * store"). Per table: a partitioned `<table>_next` with the same columns and indexes, a trigger
 * that mirrors every write of the old table into it, then a copy in batches of ascending ids whose
 * cursor is saved with each batch (a stopped conversion resumes where it was), and at the end one
 * short transaction that swaps the tables. Writers and readers go on throughout; only the swap
 * takes a lock, for as long as renames take.
 */
const TABLES = Object.keys(PARTITIONED_TABLES) as PartitionedTable[]
const next = (table: string) => `${table}_next`

export interface ConversionProgress {
  table: PartitionedTable
  copied: number
  /** The planner's estimate of the table's rows. */
  estimated: number
  seconds: number
}

export interface ConversionOptions {
  batchSize?: number
  onProgress?: (p: ConversionProgress) => void
  /** How long the swap waits for its lock before trying again (readers and writers queue behind it). */
  lockTimeoutMs?: number
}

async function columnsOf(db: Kysely<any>, table: string): Promise<string[]> {
  const { rows } = await sql<{ name: string }>`
    SELECT attname AS name FROM pg_attribute
    WHERE attrelid = to_regclass(${table}) AND attnum > 0 AND NOT attisdropped
    ORDER BY attnum`.execute(db)
  return rows.map((r) => r.name)
}

async function primaryKeyOf(
  db: Kysely<any>,
  table: string,
): Promise<{ name: string; columns: string[] }> {
  const { rows } = await sql<{ name: string; column: string }>`
    SELECT c.conname AS name, a.attname AS column
    FROM pg_constraint c CROSS JOIN LATERAL unnest(c.conkey) WITH ORDINALITY AS k(attnum, n)
    JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.attnum
    WHERE c.conrelid = to_regclass(${table}) AND c.contype = 'p' ORDER BY k.n`.execute(db)
  return { name: rows[0]!.name, columns: rows.map((r) => r.column) }
}

const ids = (names: readonly string[]) => names.map((n) => `"${n}"`).join(', ')

/** `<table>_next`, its partitions, indexes (named `<index>_next`) and the mirroring trigger. */
async function prepare(db: Kysely<any>, table: PartitionedTable, now: Date): Promise<void> {
  const target = next(table)
  if (await isPartitioned(db, target)) return
  const key = PARTITIONED_TABLES[table]
  const pk = await primaryKeyOf(db, table)
  const columns = await columnsOf(db, table)
  const { rows: indexes } = await sql<{ def: string }>`
    SELECT pg_get_indexdef(indexrelid) AS def FROM pg_index
    WHERE indrelid = to_regclass(${table}) AND NOT indisprimary`.execute(db)
  await db.transaction().execute(async (trx) => {
    await sql`CREATE TABLE ${sql.id(target)} (LIKE ${sql.id(table)} INCLUDING ALL EXCLUDING INDEXES)
      PARTITION BY RANGE (${sql.id(key)})`.execute(trx)
    for (const range of initialLayout(table, now)) await createPartition(trx, table, range, target)
    await sql`ALTER TABLE ${sql.id(target)} ADD CONSTRAINT ${sql.id(`${pk.name}_next`)}
      PRIMARY KEY (${sql.raw(ids(pk.columns))})`.execute(trx)
    for (const { def } of indexes) {
      const m = /^CREATE (UNIQUE )?INDEX (\S+) ON (ONLY )?\S+ USING /.exec(def)
      if (!m) throw new Error(`unexpected index definition: ${def}`)
      const renamed = `CREATE ${m[1] ?? ''}INDEX ${m[2]}_next ON "${target}" USING ${def.slice(m[0].length)}`
      await sql.raw(renamed).execute(trx)
    }
    // Every write to the old table reaches the new one in the same transaction: inserts and
    // updates as an upsert of the whole row, deletes as deletes.
    const set = columns.filter((c) => !pk.columns.includes(c))
    const onConflict = set.length
      ? `DO UPDATE SET ${set.map((c) => `"${c}" = excluded."${c}"`).join(', ')}`
      : 'DO NOTHING'
    const match = pk.columns.map((c) => `"${c}" = OLD."${c}"`).join(' AND ')
    await sql
      .raw(
        `
      CREATE FUNCTION "${table}_mirror"() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' THEN
          DELETE FROM "${target}" WHERE ${match};
          RETURN OLD;
        END IF;
        INSERT INTO "${target}" SELECT (NEW).* ON CONFLICT (${ids(pk.columns)}) ${onConflict};
        RETURN NEW;
      END $$`,
      )
      .execute(trx)
    await sql
      .raw(
        `CREATE TRIGGER "${table}_mirror" AFTER INSERT OR UPDATE OR DELETE ON "${table}"
      FOR EACH ROW EXECUTE FUNCTION "${table}_mirror"()`,
      )
      .execute(trx)
    await sql`INSERT INTO partition_conversion (table_name) VALUES (${table})
      ON CONFLICT (table_name) DO UPDATE SET cursor = NULL, copied = 0`.execute(trx)
  })
}

/**
 * Copies the rows after the saved cursor, a batch per transaction. FOR KEY SHARE makes a delete
 * of a row being copied wait until the batch commits, so the mirrored delete finds the copy; a
 * row the trigger already wrote is newer and stays (DO NOTHING).
 */
async function copy(
  db: Kysely<any>,
  table: PartitionedTable,
  batchSize: number,
  report: (copied: number) => void,
): Promise<void> {
  const key = sql.id(PARTITIONED_TABLES[table])
  for (;;) {
    const done = await db.transaction().execute(async (trx) => {
      const { rows } = await sql<{ cursor: string | null; copied: string }>`
        SELECT cursor::text, copied::text FROM partition_conversion WHERE table_name = ${table}
        FOR UPDATE`.execute(trx)
      const cursor = rows[0]!.cursor
      const after = cursor === null ? sql`true` : sql`${key} > ${cursor}::bigint`
      const { rows: upper } = await sql<{ upto: string }>`
        SELECT max(${key})::text AS upto FROM (SELECT ${key} FROM ${sql.id(table)}
          WHERE ${after} ORDER BY ${key} LIMIT ${batchSize}) b`.execute(trx)
      const upto = upper[0]?.upto
      if (upto === null || upto === undefined) return true
      const inserted = await sql`INSERT INTO ${sql.id(next(table))}
        SELECT * FROM ${sql.id(table)} WHERE ${after} AND ${key} <= ${upto}::bigint FOR KEY SHARE
        ON CONFLICT DO NOTHING`.execute(trx)
      const copied = Number(rows[0]!.copied) + Number(inserted.numAffectedRows ?? 0)
      await sql`UPDATE partition_conversion SET cursor = ${upto}::bigint, copied = ${copied}
        WHERE table_name = ${table}`.execute(trx)
      report(copied)
      return false
    })
    if (done) return
  }
}

/** Swaps every `<table>_next` in for its table, in one transaction, and drops the old tables. */
async function swap(db: Kysely<any>, lockTimeoutMs: number): Promise<void> {
  for (;;) {
    try {
      await db.transaction().execute(async (trx) => {
        await sql`SET LOCAL lock_timeout = ${sql.lit(`${lockTimeoutMs}ms`)}`.execute(trx)
        for (const table of TABLES) {
          await sql`LOCK TABLE ${sql.id(table)} IN ACCESS EXCLUSIVE MODE`.execute(trx)
        }
        for (const table of TABLES) {
          const { rows } = await sql<{ old: string; name: string }>`
            SELECT c.relname AS old, left(c.relname, -5) AS name FROM pg_index i
            JOIN pg_class c ON c.oid = i.indexrelid
            WHERE i.indrelid = to_regclass(${next(table)})`.execute(trx)
          // Triggers of later migrations (posts' mentions) go with the old table: made again below.
          const triggers = await sql<{ definition: string }>`
            SELECT pg_get_triggerdef(oid) AS definition FROM pg_trigger
            WHERE tgrelid = to_regclass(${table}) AND NOT tgisinternal
              AND tgname <> ${`${table}_mirror`}`.execute(trx)
          await sql`DROP TABLE ${sql.id(table)}`.execute(trx)
          await sql.raw(`DROP FUNCTION "${table}_mirror"()`).execute(trx)
          await sql`ALTER TABLE ${sql.id(next(table))} RENAME TO ${sql.id(table)}`.execute(trx)
          for (const { old, name } of rows) {
            await sql`ALTER INDEX ${sql.id(old)} RENAME TO ${sql.id(name)}`.execute(trx)
          }
          for (const { definition } of triggers.rows) await sql.raw(definition).execute(trx)
        }
        await sql`DROP TABLE partition_conversion`.execute(trx)
      })
      return
    } catch (err) {
      if ((err as { code?: string }).code !== '55P03') throw err // lock_not_available: again
    }
  }
}

/**
 * Converts what is not partitioned yet; returns false when there was nothing to do. Safe to run
 * again after a stop: it resumes from the saved cursors.
 */
export async function convertToPartitioned(
  db: Kysely<any>,
  options: ConversionOptions = {},
): Promise<boolean> {
  if (await isPartitioned(db, 'posts')) return false
  const batchSize = options.batchSize ?? 10_000
  await sql`CREATE TABLE IF NOT EXISTS partition_conversion (
    table_name text PRIMARY KEY, cursor bigint, copied bigint NOT NULL DEFAULT 0)`.execute(db)
  const now = new Date()
  for (const table of TABLES) await prepare(db, table, now)
  for (const table of TABLES) {
    const { rows } = await sql<{ n: string }>`
      SELECT greatest(reltuples, 0)::bigint::text AS n FROM pg_class
      WHERE oid = to_regclass(${table})`.execute(db)
    const started = performance.now()
    await copy(db, table, batchSize, (copied) =>
      options.onProgress?.({
        table,
        copied,
        estimated: Number(rows[0]!.n),
        seconds: (performance.now() - started) / 1000,
      }),
    )
  }
  await swap(db, options.lockTimeoutMs ?? 2_000)
  return true
}
