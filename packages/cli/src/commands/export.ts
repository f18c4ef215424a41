import { createWriteStream } from 'node:fs'
import { Readable, type Writable } from 'node:stream'
import { pipeline } from 'node:stream/promises'
import {
  createMetricsCache,
  exportConversation,
  followedConversations,
  metricsTable,
} from '@threadline/api'
import type { Config } from '@threadline/config'
import { assertSchemaCurrent, createDb, readConversationTree } from '@threadline/db'
import { EXPORT_FORMATS, isId, type ExportFormat } from '@threadline/domain'
import { err, Progress, UsageError } from '../output.js'

const USAGE = `usage: threadline export CONVERSATION_ID [--format ${EXPORT_FORMATS.join('|')}] [--out FILE]`

const isFormat = (value: string): value is ExportFormat =>
  (EXPORT_FORMATS as readonly string[]).includes(value)

/**
 * `threadline export ID`: the conversation as `GET /2/conversations/:id/export` sends it (the same
 * bytes), read from the database, to stdout or `--out FILE`, with progress on a terminal.
 */
export async function exportCommand(
  config: Config,
  args: string[],
  values: { format?: string; out?: string; metrics?: boolean; app?: string },
): Promise<void> {
  if (values.metrics) return exportMetrics(config, args, values)
  const [id, ...rest] = args
  if (!id || rest.length > 0) throw new UsageError(USAGE)
  if (!isId(id))
    throw new UsageError(`${JSON.stringify(id)} is not a conversation id (1-19 digits)\n${USAGE}`)
  const format = values.format ?? 'jsonl'
  if (!isFormat(format)) throw new UsageError(`unknown format ${JSON.stringify(format)}\n${USAGE}`)
  const db = createDb({ url: config.DATABASE_URL, poolMax: 2, applicationName: 'threadline-cli' })
  try {
    await assertSchemaCurrent(db)
    const tree = await readConversationTree(db, id, 'oldest')
    if (tree.size === 0) throw new Error(`nothing is stored for conversation ${id}`)
    const progress = new Progress()
    const file = exportConversation(db, tree, format, (done, total) =>
      progress.update(done / total, `${done} of ${total} Posts`),
    )
    const target: Writable = values.out ? createWriteStream(values.out) : process.stdout
    // stdout stays open for whatever the process writes next; a file is closed by pipeline.
    await pipeline(Readable.from(file.chunks, { objectMode: false }), target, {
      end: Boolean(values.out),
    })
    progress.done()
    err(
      `exported ${tree.size} Posts of conversation ${id} as ${format}${values.out ? ` to ${values.out}` : ''}`,
    )
  } finally {
    await db.destroy()
  }
}

const METRICS_USAGE = 'usage: threadline export --metrics [--app APP_ID] [--out FILE]'

/**
 * `threadline export --metrics`: the table of `GET /2/conversations/metrics?format=csv` (the same
 * bytes), a row per conversation the rules follow: one app's with `--app`, every app's without.
 */
async function exportMetrics(
  config: Config,
  args: string[],
  values: { out?: string; app?: string; format?: string },
): Promise<void> {
  if (args.length > 0 || (values.format !== undefined && values.format !== 'csv')) {
    throw new UsageError(METRICS_USAGE)
  }
  if (values.app !== undefined && !isId(values.app)) {
    throw new UsageError(`${JSON.stringify(values.app)} is not an app id\n${METRICS_USAGE}`)
  }
  const db = createDb({ url: config.DATABASE_URL, poolMax: 2, applicationName: 'threadline-cli' })
  try {
    await assertSchemaCurrent(db)
    const ids = await followedConversations(db, values.app ? [values.app] : undefined)
    const progress = new Progress()
    let done = 0
    async function* rows() {
      for await (const row of metricsTable(db, createMetricsCache(), ids)) {
        yield row
        if (done++ > 0) progress.update(done / (ids.length + 1), `${done - 1} of ${ids.length}`)
      }
    }
    const target: Writable = values.out ? createWriteStream(values.out) : process.stdout
    await pipeline(Readable.from(rows(), { objectMode: false }), target, {
      end: Boolean(values.out),
    })
    progress.done()
    err(
      `exported the metrics of ${ids.length} conversations${values.out ? ` to ${values.out}` : ''}`,
    )
  } finally {
    await db.destroy()
  }
}
