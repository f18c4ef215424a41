import type { Config } from '@threadline/config'
import { convertToPartitioned, createDb, ensureDatabase, migrateToLatest } from '@threadline/db'
import { redactUrl } from '@threadline/logger'
import { err } from '../output.js'

/**
 * `threadline migrate`: creates the database if needed, brings the schema to the latest version,
 * and partitions a store that holds Posts from before partitioning, online (docs/deployment.md).
 * Progress goes to stderr; stopped, it resumes where it was when run again.
 */
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
    let shown = { table: '', seconds: 0 }
    const converted = await convertToPartitioned(db, {
      onProgress: ({ table, copied, estimated, seconds }) => {
        if (table === shown.table && seconds - shown.seconds < 5) return
        shown = { table, seconds }
        const rate = Math.round(copied / Math.max(seconds, 0.001))
        err(`partitioning ${table}: ${copied} of ~${estimated} rows copied (${rate} rows/s)`)
      },
    })
    if (converted) err('posts, post_references and conversations are partitioned')
  } finally {
    await db.destroy()
  }
}
