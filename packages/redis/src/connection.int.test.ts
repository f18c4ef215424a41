import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createTestEnv, type TestEnv } from '@threadline/testing'
import { deleteByPrefix } from './connection.js'

let env: TestEnv
beforeAll(async () => {
  env = await createTestEnv()
})
afterAll(() => env?.close())

describe('deleteByPrefix', () => {
  it('deletes every key under the prefix, past one SCAN page, and nothing else', async () => {
    const mine = `${env.prefix}:gone`
    const near = `${env.prefix}:gonex` // shares the text, not the `prefix:` boundary
    const pipeline = env.redis.pipeline()
    for (let i = 0; i < 2_500; i++) pipeline.set(`${mine}:${i}`, '1')
    pipeline.xadd(`${mine}:stream`, '*', 'f', 'v')
    pipeline.set(`${near}:kept`, '1')
    await pipeline.exec()
    await deleteByPrefix(env.redis, mine)
    expect(await env.redis.keys(`${mine}:*`)).toEqual([])
    expect(await env.redis.get(`${near}:kept`)).toBe('1')
  })
})
