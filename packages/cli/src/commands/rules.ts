import type { Config } from '@threadline/config'
import { addRules, createDb, deleteRules, findApp, listRules } from '@threadline/db'
import { isId } from '@threadline/domain'
import { parseQuery } from '@threadline/query'
import { appOption, out, UsageError } from '../output.js'

const USAGE =
  'usage: threadline rules add --app ID VALUE [--tag TAG] | rules list --app ID | rules delete --app ID RULE_ID…'

/** `threadline rules add|list|delete --app ID`: an app's stream rules, without the HTTP API. */
export async function rulesCommand(
  config: Config,
  args: string[],
  values: { app?: string; tag?: string },
): Promise<void> {
  const [action, ...rest] = args
  const appId = appOption(values.app, USAGE, true)
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    if (!(await findApp(db, appId))) throw new UsageError(`no app with id ${appId}`)
    if (action === 'list') {
      for (const r of await listRules(db, appId, { limit: 100_000 })) {
        out(JSON.stringify({ id: r.id, value: r.value, tag: r.tag ?? undefined }))
      }
    } else if (action === 'add') {
      const value = rest.join(' ').trim()
      if (!value) throw new UsageError(USAGE)
      // The same parser as the API's rules endpoint: a rule the upstream and the matcher cannot read
      // is refused here, with X's wording.
      const parsed = parseQuery(value)
      if (!parsed.ok) throw new UsageError(`invalid rule: ${parsed.errors.join(', ')}`)
      const result = await addRules(db, appId, [{ value, tag: values.tag }], {
        cap: config.API_RULE_CAP,
      })
      if (result.capExceeded) throw new UsageError('the app has reached its rule cap')
      for (const r of result.created)
        out(JSON.stringify({ id: r.id, value: r.value, tag: r.tag ?? undefined }))
      for (const d of result.duplicates) out(JSON.stringify({ duplicate: true, ...d }))
    } else if (action === 'delete') {
      if (rest.length === 0 || !rest.every(isId)) throw new UsageError(USAGE)
      const result = await deleteRules(db, appId, { ids: rest })
      out(JSON.stringify({ deleted: result.deleted.map((r) => r.id), not_found: result.notFound }))
    } else {
      throw new UsageError(USAGE)
    }
  } finally {
    await db.destroy()
  }
}
