import type { Config } from '@threadline/config'
import { createApp, createDb } from '@threadline/db'
import { out, UsageError } from '../output.js'

/** `threadline apps create --name N`: prints {"app_id","bearer_token","consumer_secret"} once. */
export async function appsCommand(
  config: Config,
  args: string[],
  values: { name?: string },
): Promise<void> {
  if (args[0] !== 'create') throw new UsageError('usage: threadline apps create --name NAME')
  const name = values.name?.trim()
  if (!name) throw new UsageError('apps create needs --name NAME')
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    out(JSON.stringify(await createApp(db, name)))
  } finally {
    await db.destroy()
  }
}
