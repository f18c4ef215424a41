import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { activityStreamKey, eraseActivityPosts, publishActivity } from './activity.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

const event = (postId: string, text: string) => ({
  app_id: '1',
  body: JSON.stringify({ data: { event_type: 'post.create', payload: { id: postId, text } } }),
})

describe('eraseActivityPosts', () => {
  it('deletes the events that carry a withdrawn Post and no other', async () => {
    const before = new Date(Date.now() - 1_000)
    await publishActivity(
      env.redis,
      env.prefix,
      [event('111', 'gone soon'), event('222', 'stays'), event('1111', 'a longer id stays')],
      600_000,
    )
    expect(
      await eraseActivityPosts(env.redis, env.prefix, [{ id: '111', storedAt: before }], 600_000),
    ).toBe(1)
    const left = await env.redis.xrange(activityStreamKey(env.prefix), '-', '+')
    expect(left.map(([, fields]) => fields[3])).toEqual([
      event('222', 'stays').body,
      event('1111', 'a longer id stays').body,
    ])
    // A Post stored before the retention: nothing to look for.
    const old = new Date(Date.now() - 3_600_000)
    expect(
      await eraseActivityPosts(env.redis, env.prefix, [{ id: '222', storedAt: old }], 600_000),
    ).toBe(0)
  })
})
