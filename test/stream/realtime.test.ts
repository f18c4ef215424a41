import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createQueue, type PostsJob } from '@threadline/queue'
import { generateId } from '@threadline/domain'
import { createTestEnv, waitFor, type TestEnv } from '@threadline/testing'
import { FakeUpstream } from '../ingest/fake-upstream.js'
import { fastOptions, startIngest } from '../ingest/harness.js'
import {
  appWithRules,
  openRawStream,
  postLine,
  startStreamServer,
  startWriter,
  waitForStream,
} from './harness.js'

/**
 * Real time end to end (docs/architecture.md, group commit): a Post the upstream writes on a quiet
 * system goes from the upstream's socket to a filtered-stream client's through the real ingest,
 * queue, writer, `stored` stream and API, with no timer on the way. Asserted on the path, not on
 * the clock: the ingest queued it at once, in a job of its own.
 */
let env: TestEnv

beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('a single Post through the whole stack', () => {
  it('is queued at once in a job of one and reaches the stream client', async () => {
    await startWriter(env)
    const api = await startStreamServer(env)
    const fake = new FakeUpstream()
    await fake.start()
    env.defer(() => fake.close())

    const id = generateId()
    const app = await appWithRules(env, 'realtime', [{ value: `conversation_id:${id}` }])
    const { ingest } = await startIngest(env, fastOptions(fake.url))
    await waitFor('the stream connected upstream', () => fake.openStreams === 1)
    const client = await openRawStream(api.url, app.token, '', env)
    await waitForStream(api, app.appId)

    const post = postLine({
      id,
      text: 'one Post, quiet system',
      author: { id: '7', username: 'u7' },
    })
    fake.publish(post.line)
    await waitFor('the Post on the stream client', () =>
      client.messages.some((m) => m.data?.id === id),
    )

    // Nothing was in flight: the batch went at once, neither gathered behind another nor full.
    expect(ingest.stats().streamBatches).toEqual({ atOnce: 1, gathered: 0, full: 0 })
    const queue = createQueue<PostsJob>('posts', {
      connection: env.redis,
      prefix: env.prefix,
      logger: env.logger,
    })
    env.defer(() => queue.close())
    const jobs = (await queue.getJobs(['completed'])).filter((j) => j.data.source === 'stream')
    expect(jobs.map((j) => j.data.count)).toEqual([1])
    expect(client.badFraming).toEqual([])
  })
})
