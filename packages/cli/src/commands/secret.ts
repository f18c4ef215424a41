import type { Config } from '@threadline/config'
import { createDb, rotateApiTokenSecret } from '@threadline/db'
import { err, out, UsageError } from '../output.js'

/**
 * `threadline secret rotate`: a new pagination-token secret in the database (docs/operations.md,
 * "Secrets"). The previous one keeps verifying until the next rotation; API processes pick the
 * new one up when they restart.
 */
export async function secretCommand(config: Config, args: string[]): Promise<void> {
  if (args[0] !== 'rotate') throw new UsageError('usage: threadline secret rotate')
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    const { rotated_at } = await rotateApiTokenSecret(db)
    out(JSON.stringify({ rotated_at: rotated_at.toISOString() }))
    if (config.API_TOKEN_SECRET) {
      err('note: API_TOKEN_SECRET is set in this environment and overrides the database secret')
    }
  } finally {
    await db.destroy()
  }
}
