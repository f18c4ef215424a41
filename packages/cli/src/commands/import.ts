import { createReadStream } from 'node:fs'
import { stat } from 'node:fs/promises'
import { basename } from 'node:path'
import { createInterface } from 'node:readline'
import type { Config } from '@threadline/config'
import { assertSchemaCurrent, createDb } from '@threadline/db'
import type { Logger } from '@threadline/logger'
import {
  addPostsBatch,
  createQueue,
  watchJobs,
  type JobOutcome,
  type JobWatch,
  type PostsJob,
  type PostsJobResult,
  POSTS_BATCH_MAX_BYTES,
  POSTS_BATCH_MAX_LINES,
} from '@threadline/queue'
import { closeRedis, createRedis } from '@threadline/redis'
import type { Writer } from '@threadline/writer'
import { reachRedis } from '../failure.js'
import { err, out, Progress, UsageError } from '../output.js'
import { composeWriter } from '../writer.js'

export interface ImportSummary {
  files: number
  lines: number
  jobs: number
  inserted: number
  updated: number
  rejected: number
  /** Jobs whose result could not be read back (removed from Redis before we looked). */
  unknown: number
}

/** The files' total size in bytes (the progress bar's whole); a file that cannot be read is a usage error. */
async function totalSize(files: string[]): Promise<number> {
  const sizes = await Promise.all(
    files.map(async (f) => {
      try {
        return (await stat(f)).size
      } catch {
        throw new UsageError(`cannot read ${f}`)
      }
    }),
  )
  return sizes.reduce((a, b) => a + b, 0)
}

/**
 * `threadline import FILE…`: feeds NDJSON files (filtered-stream lines, search or lookup pages,
 * twarc2 output) through the `posts` queue, the same path as the live stream, then waits for the
 * writers and prints a summary. With no writer consuming the queue it runs one in this process.
 */
export async function importFiles(
  config: Config,
  logger: Logger,
  files: string[],
  options: { wait: boolean },
): Promise<ImportSummary> {
  if (files.length === 0) throw new UsageError('usage: threadline import FILE… [--no-wait]')
  const totalBytes = await totalSize(files)
  // Refuse before queueing anything: writers would refuse the batches of a schema that is behind.
  const db = createDb({ url: config.DATABASE_URL, poolMax: 1, applicationName: 'threadline-cli' })
  try {
    await assertSchemaCurrent(db)
  } finally {
    await db.destroy()
  }
  const redis = createRedis(config, 'worker', 'import')
  try {
    await reachRedis(redis, config)
  } catch (error) {
    redis.disconnect()
    throw error
  }
  const queue = createQueue<PostsJob, PostsJobResult>('posts', {
    connection: redis,
    prefix: config.REDIS_PREFIX,
    logger,
  })
  const summary: ImportSummary = {
    files: files.length,
    lines: 0,
    jobs: 0,
    inserted: 0,
    updated: 0,
    rejected: 0,
    unknown: 0,
  }
  const progress = new Progress()
  let finished = 0
  const outcomes: Array<Promise<void>> = []
  const counted = (o: JobOutcome<PostsJobResult>) => {
    finished += 1
    if (o.result) {
      summary.inserted += o.result.inserted
      summary.updated += o.result.updated
      summary.rejected += o.result.rejects
    } else {
      summary.unknown += 1
    }
    progress.update(
      finished / Math.max(summary.jobs, 1),
      `stored ${summary.inserted} Posts, ${summary.rejected} rejected`,
    )
  }
  let watch: JobWatch<PostsJobResult> | undefined
  let writer: Writer | undefined
  try {
    if (options.wait) watch = await watchJobs(queue, 'posts', config.REDIS_PREFIX, redis)
    let readBytes = 0
    // Each job's observation time is a millisecond later than the previous one, so when a file
    // holds the same Post twice the later line is the copy that stays.
    const started = Date.now()
    for (const [i, file] of files.entries()) {
      const source = `import:${basename(file)}`
      const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity })
      let batch: string[] = []
      let batchBytes = 0
      const flush = async () => {
        if (batch.length === 0) return
        const observedAt = new Date(started + summary.jobs).toISOString()
        const job = await addPostsBatch(queue, redis, config.REDIS_PREFIX, {
          source,
          observed_at: observedAt,
          lines: batch,
        })
        if (watch) outcomes.push(watch.outcome(job.id!).then(counted))
        summary.jobs += 1
        batch = []
        batchBytes = 0
      }
      for await (const line of lines) {
        readBytes += Buffer.byteLength(line) + 1
        if (line.trim() === '') continue
        summary.lines += 1
        batch.push(line)
        batchBytes += line.length
        if (batch.length >= POSTS_BATCH_MAX_LINES || batchBytes >= POSTS_BATCH_MAX_BYTES)
          await flush()
        progress.update(
          readBytes / Math.max(totalBytes, 1),
          `file ${i + 1}/${files.length}: ${summary.lines} lines read, ${summary.jobs} batches queued`,
        )
      }
      await flush()
    }
    progress.done()
    err(`queued ${summary.lines} lines from ${files.length} file(s) as ${summary.jobs} batch(es)`)
    if (!options.wait) return summary
    if ((await queue.getWorkersCount()) === 0) {
      err('no writer is consuming the queue; running one in this process')
      writer = await composeWriter(config, logger)
      await writer.start()
    }
    await Promise.all(outcomes)
    progress.done()
    return summary
  } finally {
    await watch?.close()
    await writer?.close()
    await queue.close()
    await closeRedis(redis)
  }
}

export function printSummary(s: ImportSummary): void {
  out(JSON.stringify(s))
  err(
    `read ${s.lines} lines, queued ${s.jobs} batches; stored ${s.inserted} new Posts, ` +
      `updated ${s.updated}, rejected ${s.rejected}` +
      (s.rejected ? ' (see the ingest_rejects table)' : '') +
      (s.unknown ? `; ${s.unknown} batch results no longer in Redis` : ''),
  )
}
