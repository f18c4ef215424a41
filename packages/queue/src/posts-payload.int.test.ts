import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { addPostsBatch } from './posts-payload.js'
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

async function queued(prefix: string): Promise<PostsJob[]> {
  const queue = postsQueue(prefix)
  try {
    const jobs = await queue.getJobs(['waiting'])
    return jobs.map((j) => postsJobSchema.parse(j.data))
  } finally {
    await queue.close()
  }
}

async function add(prefix: string, lines: (string | Buffer)[], id?: string) {
  const queue = postsQueue(prefix)
  try {
    return await addPostsBatch(queue, { id, source: 'test', observed_at: observedAt, lines })
  } finally {
    await queue.close()
  }
}

describe('posts jobs', () => {
  it('carry exactly their lines, whatever they hold', async () => {
    const prefix = `${env.prefix}:lines`
    // Multi-byte text, escapes, CRLF, a bare \n or \r, nothing at all.
    const lines = Array.from(
      { length: 400 },
      (_, i) => `{"data":{"id":"${i + 1}","text":"héllo 🧵 \\"q\\" \\u2028 ${'x'.repeat(40)}"}}`,
    )
    lines.push('a\nb', 'ends with \r', '\n starts with a newline', '', '{\r\n"data": {"id": "1"}}')
    await add(prefix, lines)
    const [job] = await queued(prefix)
    expect(job).toEqual({ source: 'test', observed_at: observedAt, lines })
  })

  it('take lines as the bytes the upstream sent, and carry them as text', async () => {
    const prefix = `${env.prefix}:bytes`
    const lines = Array.from(
      { length: 30 },
      (_, i) => `{"data":{"id":"${i + 1}","text":"日本語 🧵"}}`,
    )
    // Bytes that are not all UTF-8 become the text they decode to (U+FFFD for each bad sequence).
    const bad = Buffer.from([0x61, 0xff, 0x62, 0xf0, 0x9f, 0x98, 0x63])
    await add(prefix, [...lines.map((l, i) => (i % 2 === 0 ? Buffer.from(l, 'utf8') : l)), bad])
    const [job] = await queued(prefix)
    expect(job!.lines).toEqual([...lines, 'a\ufffdb\ufffdc'])
  })

  it('are added once for an id, however often the add is retried', async () => {
    const prefix = `${env.prefix}:retry`
    const lines = ['{"data":{"id":"1","text":"hi"}}']
    const first = await add(prefix, lines, 'batch-1')
    // The add reached Redis but its caller saw an error: the retry finds the job.
    const again = await add(prefix, lines, 'batch-1')
    expect(again.id).toBe(first.id)
    expect(await queued(prefix)).toHaveLength(1)
  })

  it('refuse a job without lines', () => {
    const base = { source: 'test', observed_at: observedAt }
    expect(postsJobSchema.safeParse(base).success).toBe(false)
    expect(postsJobSchema.safeParse({ ...base, lines: [] }).success).toBe(false)
    expect(postsJobSchema.safeParse({ ...base, payload: 'k', count: 1 }).success).toBe(false)
  })
})
