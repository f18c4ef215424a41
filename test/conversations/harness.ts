import { sql } from '@threadline/db'
import { addPostsBatch, createQueue, type PostsJob } from '@threadline/queue'
import type { TestEnv } from '@threadline/testing'
import { streamLine, type GenPost } from './fixture.js'

/** The posts queue as the ingest fills it, for the real writer of a test file to drain. */
export function postsQueue(env: TestEnv) {
  const queue = createQueue<PostsJob>('posts', {
    connection: env.redis,
    prefix: env.prefix,
    logger: env.logger,
  })
  env.defer(() => queue.close())
  return {
    /** Queues Posts as stream lines, `batch` to a job (each batch's lines beside its job). */
    async send(posts: readonly GenPost[], batch = 40) {
      for (let i = 0; i < posts.length; i += batch) {
        await addPostsBatch(queue, env.redis, env.prefix, {
          source: 'test',
          observed_at: new Date().toISOString(),
          lines: posts.slice(i, i + batch).map(streamLine),
        })
      }
    },
  }
}

/** Posts stored in a conversation. */
export async function storedCount(env: TestEnv, conversationId: string): Promise<number> {
  const { rows } = await sql<{ n: string }>`
    SELECT count(*) AS n FROM posts WHERE conversation_id = ${conversationId}`.execute(env.db)
  return Number(rows[0]!.n)
}
