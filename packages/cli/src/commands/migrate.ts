import type { Config } from '@threadline/config'
import { createDb, ensureDatabase, migrateToLatest } from '@threadline/db'
import { redactUrl } from '@threadline/logger'
import { err } from '../output.js'

/** `threadline migrate`: creates the database if needed and brings the schema to the latest version. */
export async function migrate(config: Config): Promise<void> {
  if (await ensureDatabase(config.DATABASE_URL))
    err(`created database ${redactUrl(config.DATABASE_URL)}`)
  const db = createDb({
    url: config.DATABASE_URL,
    poolMax: 1,
    applicationName: 'threadline-migrate',
  })
  try {
    const applied = await migrateToLatest(db)
    err(applied.length ? `applied ${applied.join(', ')}` : 'schema is up to date')
  } finally {
    await db.destroy()
  }
}
