import type { Config } from '@threadline/config'
import { createDb, isPartitioned, maintainPartitions } from '@threadline/db'
import { err, out } from '../output.js'

/**
 * `threadline partitions`: the writer's maintenance pass by hand (docs/operations.md, "Partitions"):
 * creates the next days' partitions and, with POSTS_RETENTION_DAYS, drops expired ones. Prints
 * `{"created":[…],"dropped":[…]}`.
 */
export async function partitionsCommand(config: Config): Promise<void> {
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    if (!(await isPartitioned(db, 'posts'))) {
      err('posts is not partitioned yet: `threadline migrate` converts it (docs/deployment.md)')
    }
    out(
      JSON.stringify(
        await maintainPartitions(db, new Date(), config.POSTS_RETENTION_DAYS || undefined),
      ),
    )
  } finally {
    await db.destroy()
  }
}
