import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import {
  addPostsBatch,
  createPayloadSweeper,
  dropPostsPayload,
  loadPostsLines,
  postsPayloadKey,
} from './posts-payload.js'
import { createQueue, postsJobSchema, type PostsJob } from './queues.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const observedAt = '2026-11-21T10:00:00.000Z'

function postsQueue(prefix: string) {
  return createQueue<PostsJob>('posts', { connection: env.redis, prefix, logger: env.logger })
}

/** `count` stream lines, Posts 1…count, each with `text` as its text. */
function sampleLines(count: number, text: string): string[] {
  return Array.from({ length: count }, (_, i) => `{"data":{"id":"${i + 1}","text":"${text}"}}`)
}

async function queued(prefix: string): Promise<PostsJob[]> {
  const queue = postsQueue(prefix)
  try {
    const jobs = await queue.getJobs(['waiting'])
    return jobs.map((j) => postsJobSchema.parse(j.data))
  } finally {
    await queue.close()
  }
}

async function add(prefix: string, lines: (string | Buffer)[]) {
  const queue = postsQueue(prefix)
  try {
    await addPostsBatch(queue, env.redis, prefix, {
      source: 'test',
      observed_at: observedAt,
      lines,
    })
  } finally {
    await queue.close()
  }
}

describe('posts payloads', () => {
  it('keeps a batch beside its job and gives back exactly its lines', async () => {
    const prefix = `${env.prefix}:big`
    // Multi-byte text, escapes, a bare \n and a trailing \r inside lines: none is the separator.
    const lines = Array.from(
      { length: 400 },
      (_, i) => `{"data":{"id":"${i + 1}","text":"héllo 🧵 \\"q\\" \\u2028 ${'x'.repeat(40)}"}}`,
    )
    // A list keeps each line whole, whatever it holds: CRLF, a bare \n or \r, nothing at all.
    lines.push('a\nb', 'ends with \r', '\n starts with a newline', '', '{\r\n"data": {"id": "1"}}')
    await add(prefix, lines)
    const [job] = await queued(prefix)
    expect(job).toMatchObject({ source: 'test', observed_at: observedAt, count: lines.length })
    expect(job!.payload).toMatch(new RegExp(`^${postsPayloadKey(prefix, '')}`))
    expect(await env.redis.type(job!.payload!)).toBe('list')
    expect(await loadPostsLines(env.redis, job!)).toEqual(lines)

    await dropPostsPayload(env.redis, job!)
    expect(await env.redis.exists(job!.payload!)).toBe(0)
    // A payload that is gone reads as undefined (the batch was committed), not as no lines.
    expect(await loadPostsLines(env.redis, job!)).toBeUndefined()
  })

  it('takes lines as the bytes the upstream sent, and gives them back as their text', async () => {
    const prefix = `${env.prefix}:bytes`
    const lines = Array.from(
      { length: 300 },
      (_, i) => `{"data":{"id":"${i + 1}","text":"日本語 🧵 ${'y'.repeat(60)}"}}`,
    )
    // Bytes that are not all UTF-8 read back as the text they decode to (U+FFFD each bad sequence).
    const bad = Buffer.from([0x61, 0xff, 0x62, 0xf0, 0x9f, 0x98, 0x63])
    await add(prefix, [...lines.map((l, i) => (i % 2 === 0 ? Buffer.from(l, 'utf8') : l)), bad])
    const [job] = await queued(prefix)
    expect(await loadPostsLines(env.redis, job!)).toEqual([...lines, 'a\ufffdb\ufffdc'])
  })

  it('adds a batch with an id once, however often it is retried, and leaves no payload behind', async () => {
    const prefix = `${env.prefix}:retry`
    const lines = sampleLines(200, 'z'.repeat(100))
    const queue = postsQueue(prefix)
    try {
      const batch = { id: 'batch-1', source: 'test', observed_at: observedAt, lines }
      // As the ingest adds a batch: the first attempt with an id made for it.
      const first = await addPostsBatch(queue, env.redis, prefix, { ...batch, firstAttempt: true })
      // The add reached Redis but its caller saw an error: the retry finds the job.
      const again = await addPostsBatch(queue, env.redis, prefix, batch)
      expect(again.id).toBe(first.id)
      expect((await queue.getJobCounts('waiting')).waiting).toBe(1)
      expect(await env.redis.llen(first.data.payload!)).toBe(lines.length)
      // A writer stored the batch and deleted its payload; a late retry must not write it back.
      await dropPostsPayload(env.redis, first.data)
      await addPostsBatch(queue, env.redis, prefix, batch)
      expect(await env.redis.keys(postsPayloadKey(prefix, '*'))).toEqual([])
    } finally {
      await queue.close()
    }
  })

  it('replaces, never appends to, the lines of an attempt whose job was not added', async () => {
    const prefix = `${env.prefix}:repush`
    const lines = sampleLines(100, 'r'.repeat(200))
    const queue = postsQueue(prefix)
    try {
      // The first attempt pushed its lines, then failed before adding its job.
      const key = postsPayloadKey(prefix, 'batch-2')
      await env.redis.rpush(key, ...lines)
      await addPostsBatch(queue, env.redis, prefix, {
        id: 'batch-2',
        source: 'test',
        observed_at: observedAt,
        lines,
      })
      expect(await env.redis.llen(key)).toBe(lines.length)
      const [job] = await queued(prefix)
      expect(await loadPostsLines(env.redis, job!)).toEqual(lines)
    } finally {
      await queue.close()
    }
  })

  it('refuses a job without its payload', () => {
    const base = { source: 'test', observed_at: observedAt }
    expect(postsJobSchema.safeParse(base).success).toBe(false)
    expect(postsJobSchema.safeParse({ ...base, lines: ['a'] }).success).toBe(false)
    expect(postsJobSchema.safeParse({ ...base, payload: 'k', count: 0 }).success).toBe(false)
  })

  it('sweeps a payload that has had no job for two passes, and keeps every payload with a job', async () => {
    const prefix = `${env.prefix}:sweep`
    const queue = postsQueue(prefix)
    try {
      const lines = sampleLines(100, 'x'.repeat(200))
      const batch = (id: string) => ({ id, source: 'test', observed_at: observedAt, lines })
      await addPostsBatch(queue, env.redis, prefix, batch('with-job'))
      // Payloads whose add never came (the process died between the two writes).
      const orphan = postsPayloadKey(prefix, 'orphan')
      const late = postsPayloadKey(prefix, 'late')
      const rescued = postsPayloadKey(prefix, 'rescued')
      await env.redis.set(orphan, lines.join('\r\n'))
      await env.redis.set(rescued, lines.join('\r\n'))
      const sweeper = createPayloadSweeper(queue, env.redis, prefix, 0)

      expect(await sweeper.sweep()).toBe(0) // first sight: suspects only
      await env.redis.set(late, 'x')
      // A retried add of `rescued` comes through between the passes: its job now exists.
      await addPostsBatch(queue, env.redis, prefix, batch('rescued'))
      expect(await sweeper.sweep()).toBe(1)
      expect(await env.redis.exists(orphan)).toBe(0)
      expect(await env.redis.exists(rescued)).toBe(1)
      expect(await env.redis.exists(late)).toBe(1) // seen once so far
      expect(await sweeper.sweep()).toBe(1)
      expect(await env.redis.exists(late)).toBe(0)
      expect(await env.redis.exists(postsPayloadKey(prefix, 'with-job'))).toBe(1)
      expect(await env.redis.exists(rescued)).toBe(1)

      // A payload written within minIdleSeconds is never deleted (an add may be under way).
      const fresh = postsPayloadKey(prefix, 'fresh')
      await env.redis.set(fresh, 'x')
      const patient = createPayloadSweeper(queue, env.redis, prefix, 3_600)
      expect(await patient.sweep()).toBe(0)
      expect(await patient.sweep()).toBe(0)
      expect(await env.redis.exists(fresh)).toBe(1)
    } finally {
      await queue.close()
    }
  })
})
