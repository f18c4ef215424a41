import { randomUUID } from 'node:crypto'
import type { Job, Queue } from 'bullmq'
import {
  isCluster,
  throwFirstError,
  type Redis,
  PreparedCommand,
  sendPrepared,
  scriptCommand,
} from '@threadline/redis'
import type { PostsJob } from './queues.js'

/**
 * Large `posts` batches travel beside their job, not inside it (a claim check).
 *
 * A stream batch is ~500 lines of ~2 KB. Inside the job, BullMQ would JSON-escape it into one
 * string, measure and encode it, copy it through its Lua scripts into the job hash, hand it back
 * and decode and unescape it in the writer; and a completed job keeps its data for
 * `removeOnComplete` (1,000 jobs: a gigabyte of Redis). Beside it, the lines are a Redis list, one
 * element a line (RPUSH), the job holds only its key, and the writer reads it with one LRANGE and
 * deletes it once the batch is committed.
 *
 * A list, not one string of the lines joined: the client's reply parser hands each element of an
 * LRANGE back as a view of the socket's bytes, where a reply of a megabyte arrives in many reads
 * that it copies into a fresh buffer. That copy, into memory the process had to fault in, cost
 * the writer ≈ 2–6 ms a batch, against ≈ 0.5 ms for the list; writing the list cost the ingest
 * less too, as its lines are not joined first (docs/performance-log.md). Jobs queued with a joined
 * payload (`list` unset, by an ingest before the list) are still read.
 *
 * The payload key is deleted only after a writer committed the batch. A job whose payload is gone
 * was therefore stored already: the writer stopped after committing and deleting, before BullMQ
 * marked the job done, and the job came back as stalled.
 */

/** Below this many characters a batch stays inside its job: a second key would cost more. */
export const INLINE_PAYLOAD_CHARS = 16 * 1024

export function postsPayloadKey(prefix: string, id: string): string {
  return `${prefix}:posts-payload:${id}`
}

export interface PostsBatch {
  /**
   * The same for every attempt to add this batch: it names the payload key and the job (BullMQ
   * ignores a second add of a job id it holds), so a retry after an add whose reply was lost
   * neither queues the batch twice nor leaves a payload behind. Default: a fresh id.
   */
  id?: string
  /**
   * `id` was made for this call and never tried before, so no earlier attempt can have added its
   * job: the add skips looking for one (a round trip and a job read per batch).
   */
  firstAttempt?: boolean
  source: string
  observed_at: string
  /** Text, or the UTF-8 bytes the upstream sent (the stream's lines are never decoded on the way). */
  lines: readonly (string | Buffer)[]
}

/**
 * Adds a `posts` job for `batch`: its lines inside the job when small, else in a payload list
 * written first (see `id` for retries).
 */
export async function addPostsBatch(
  queue: Queue<PostsJob>,
  redis: Redis,
  prefix: string,
  batch: PostsBatch,
): Promise<Job<PostsJob>> {
  const { source, observed_at: observedAt, lines } = batch
  const id = batch.id ?? randomUUID()
  const retry = batch.id !== undefined && !batch.firstAttempt
  if (retry) {
    // A retry of an add that reached Redis (its reply was lost): the job is there, and its payload
    // may already be stored and deleted. Writing the payload again would leave it behind.
    const existing = await queue.getJob(id)
    if (existing) return existing
  }
  let size = 0
  for (const line of lines) size += line.length
  if (size < INLINE_PAYLOAD_CHARS) {
    const inline = lines.map(lineText)
    return queue.add('posts', { source, observed_at: observedAt, lines: inline }, { jobId: id })
  }
  const key = postsPayloadKey(prefix, id)
  if (retry) {
    // An earlier attempt may have pushed the lines already: replace them, never append twice.
    const replies = await redis
      .multi()
      .del(key)
      .rpush(key, ...lines)
      .exec()
    if (!replies) throw new Error(`could not write the payload ${key}`)
    throwFirstError(replies)
  } else {
    // Made in one buffer (see PreparedCommand): ioredis would copy the lines into a request of its
    // own, a fresh ≈ 1 MB allocation a batch (≈ 2.3 against 1.7 µs of ingest CPU a line).
    await sendPrepared(redis, new PreparedCommand('rpush', [key, ...lines]))
  }
  return queue.add(
    'posts',
    { source, observed_at: observedAt, payload: key, count: lines.length, list: true },
    { jobId: id },
  )
}

/**
 * The lines of a `posts` job: inline (text), or read from its payload key (each line a Buffer,
 * decoded alone when it is read: see lineText). Undefined when the payload is gone (the batch was
 * committed already: see above).
 */
export async function loadPostsLines(
  redis: Redis,
  job: PostsJob,
): Promise<Array<string | Buffer> | undefined> {
  if (job.lines) return job.lines
  if (job.list) {
    const lines = await redis.lrangeBuffer(job.payload, 0, -1)
    return lines.length === 0 ? undefined : lines
  }
  const buffer = await redis.getBuffer(job.payload)
  if (buffer === null) return undefined
  return splitLineBytes(buffer)
}

const SEPARATOR_BYTES = Buffer.from('\r\n')

/**
 * A joined payload (see above) split on its separator; each line is a view of `buffer` (no copy),
 * to be decoded alone when it is read (UTF-8 never holds `\r\n` inside a character). Such a payload
 * never held a line with the separator: the ingest kept those batches inside their job.
 */
export function splitLineBytes(buffer: Buffer): Buffer[] {
  const lines: Buffer[] = []
  let start = 0
  for (;;) {
    const end = buffer.indexOf(SEPARATOR_BYTES, start)
    if (end === -1) break
    lines.push(buffer.subarray(start, end))
    start = end + SEPARATOR_BYTES.length
  }
  lines.push(buffer.subarray(start))
  return lines
}

/** A line as text (a payload line is decoded here, alone). */
export function lineText(line: string | Buffer): string {
  return typeof line === 'string' ? line : line.toString('utf8')
}

/** Deletes a committed job's payload (nothing for an inline one). */
export async function dropPostsPayload(redis: Redis, job: PostsJob): Promise<void> {
  if (job.payload !== undefined) await redis.del(job.payload)
}

export interface PayloadSweeper {
  /** One pass; resolves to the number of payloads deleted. */
  sweep(): Promise<number>
}

/**
 * Deletes a payload only if nothing wrote or read it for ARGV[1] seconds: a batch being added
 * writes its payload (again, on a retry) just before its job, so a payload in the middle of an add
 * is never idle. Where idle time is not kept (an LFU eviction policy), nothing is deleted.
 */
const UNLINK_IDLE = `
local ok, idle = pcall(redis.call, 'OBJECT', 'IDLETIME', KEYS[1])
if not ok or not idle or idle < tonumber(ARGV[1]) then return 0 end
return redis.call('UNLINK', KEYS[1])`

/**
 * Deletes payloads that no job will ever read. A payload is written before its job is added, so a
 * process that dies between the two, or an add that fails for good, leaves one behind (a whole
 * batch of Redis memory); so does a writer whose delete after commit failed, once its completed
 * job is trimmed. Each pass lists the payload keys whose job does not exist (BullMQ keeps a job,
 * waiting, active, delayed, completed or failed, under the payload's id). A key listed by the
 * previous pass, still without a job and idle for `minIdleSeconds`, is deleted: passes are minutes
 * apart, and the idle check covers an add that starts between the check and the delete.
 */
export function createPayloadSweeper(
  queue: Queue<PostsJob>,
  redis: Redis,
  prefix: string,
  minIdleSeconds = 60,
): PayloadSweeper {
  const head = postsPayloadKey(prefix, '')
  let suspects = new Set<string>()
  return {
    async sweep() {
      const unlinkIdle = scriptCommand<number>(redis, 'threadlineUnlinkIdle', UNLINK_IDLE)
      const found = new Set<string>()
      for (const server of isCluster(redis) ? redis.nodes('master') : [redis]) {
        let cursor = '0'
        do {
          const [next, keys] = await server.scan(cursor, 'MATCH', `${head}*`, 'COUNT', 1000)
          for (const key of keys) {
            if (!(await queue.getJob(key.slice(head.length)))) found.add(key)
          }
          cursor = next
        } while (cursor !== '0')
      }
      let deleted = 0
      for (const key of found) {
        if (!suspects.has(key)) continue
        const gone = await unlinkIdle(key, String(minIdleSeconds))
        deleted += gone
        if (gone) found.delete(key)
      }
      suspects = found
      return deleted
    },
  }
}
