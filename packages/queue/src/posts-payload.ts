import { randomUUID } from 'node:crypto'
import type { Job, Queue } from 'bullmq'
import { isCluster, scriptCommand, throwFirstError, type Redis } from '@threadline/redis'
import type { PostsJob } from './queues.js'

/**
 * A `posts` batch travels beside its job (a claim check): its lines are a Redis list, one element a
 * line, and the job holds only its key. Inside the job, BullMQ would JSON-escape a stream batch
 * (about a megabyte) into one string, copy it through its scripts and hand it back whole, and a
 * completed job would keep it; the list is written with one RPUSH, read with one LRANGE and
 * deleted once the batch is committed.
 *
 * The payload key is deleted only after a writer committed the batch. A job whose payload is gone
 * was therefore stored already: the writer stopped after committing and deleting, before BullMQ
 * marked the job done, and the job came back as stalled.
 */
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
  /** `id` was made for this call and never tried before: no earlier attempt can have added its job. */
  firstAttempt?: boolean
  source: string
  observed_at: string
  /** Text, or the UTF-8 bytes the upstream sent. */
  lines: readonly (string | Buffer)[]
}

/** Adds a `posts` job for `batch`, its lines written first beside it (see `id` for retries). */
export async function addPostsBatch(
  queue: Queue<PostsJob>,
  redis: Redis,
  prefix: string,
  batch: PostsBatch,
): Promise<Job<PostsJob>> {
  const { source, observed_at: observedAt, lines } = batch
  const id = batch.id ?? randomUUID()
  if (batch.id !== undefined && !batch.firstAttempt) {
    // A retry of an add that reached Redis (its reply was lost): the job is there, and its payload
    // may already be stored and deleted. Writing the payload again would leave it behind.
    const existing = await queue.getJob(id)
    if (existing) return existing
  }
  const key = postsPayloadKey(prefix, id)
  // Replaced, never appended to: an earlier attempt may have pushed the lines already.
  const replies = await redis
    .multi()
    .del(key)
    .rpush(key, ...lines)
    .exec()
  if (!replies) throw new Error(`could not write the payload ${key}`)
  throwFirstError(replies)
  return queue.add(
    'posts',
    { source, observed_at: observedAt, payload: key, count: lines.length },
    { jobId: id },
  )
}

/**
 * The lines of a `posts` job, as text (each decoded alone: bytes that are not UTF-8 become U+FFFD).
 * Undefined when the payload is gone (the batch was committed already: see above).
 */
export async function loadPostsLines(redis: Redis, job: PostsJob): Promise<string[] | undefined> {
  const lines = await redis.lrangeBuffer(job.payload, 0, -1)
  return lines.length === 0 ? undefined : lines.map((line) => line.toString('utf8'))
}

/** Deletes a committed job's payload. */
export async function dropPostsPayload(redis: Redis, job: PostsJob): Promise<void> {
  await redis.del(job.payload)
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
