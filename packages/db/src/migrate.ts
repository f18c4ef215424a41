import { Migrator, sql, type Kysely, type MigrationResultSet } from 'kysely'
import { createDb, type Db, type DbOptions } from './connect.js'
import { migrations } from './migrations/index.js'

/**
 * @NOTE Kysely looks for its bookkeeping tables in every schema unless told which one, so a
 * database holding several schemas (one per test file, or per tenant) would confuse it: pin them to
 * the connection's current schema (the first of its search_path).
 */
async function migrator(db: Kysely<any>): Promise<Migrator> {
  const { rows } = await sql<{ schema: string }>`SELECT current_schema() AS schema`.execute(db)
  return new Migrator({
    db,
    provider: { getMigrations: async () => migrations },
    migrationTableSchema: rows[0]!.schema,
  })
}

export class MigrationError extends Error {
  override name = 'MigrationError'
}

export class SchemaBehindError extends Error {
  override name = 'SchemaBehindError'
  constructor(readonly pending: string[]) {
    super(
      `The database schema is behind (${pending.length} pending: ${pending.join(', ')}). ` +
        'Run `pnpm threadline migrate` (or the compose `migrate` service) first.',
    )
  }
}

/** Brings the schema to the latest version; returns the names applied. */
export async function migrateToLatest(db: Kysely<any>): Promise<string[]> {
  const { error, results }: MigrationResultSet = await (await migrator(db)).migrateToLatest()
  if (error) {
    const failed = results?.find((r) => r.status === 'Error')?.migrationName
    throw new MigrationError(`migration ${failed ?? '?'} failed: ${(error as Error).message}`, {
      cause: error,
    })
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName)
}

/** Services refuse to start on a schema that is behind the code. */
export async function assertSchemaCurrent(db: Kysely<any>): Promise<void> {
  const pending = (await (await migrator(db)).getMigrations())
    .filter((m) => m.executedAt === undefined)
    .map((m) => m.name)
  if (pending.length > 0) throw new SchemaBehindError(pending)
}

/** A database handle for a service: refuses to start (and releases its pool) on a schema that is behind. */
export async function openServiceDb(options: DbOptions): Promise<Db> {
  const db = createDb(options)
  try {
    await assertSchemaCurrent(db)
    return db
  } catch (err) {
    await db.destroy()
    throw err
  }
}
