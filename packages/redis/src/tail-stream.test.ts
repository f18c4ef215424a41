import { describe, expect, it } from 'vitest'
import { withDeadline } from '@threadline/runtime'
import { createRedis } from './connection.js'
import { tailStream } from './tail-stream.js'

describe('tailStream', () => {
  it('closes at once when Redis never answered (a command sent before the connection was ready)', async () => {
    // Nothing listens on port 1: the tail's connection retries for ever and its XREVRANGE waits.
    const redis = createRedis('redis://127.0.0.1:1', 'worker', 'tail-test')
    redis.on('error', () => {})
    try {
      const tail = tailStream(redis, 'nowhere', {
        name: 'tail-test',
        count: 1,
        blockMs: 1_000,
        onEntries: () => {},
      })
      // Closed while the connections wait to retry (the tail's duplicate fails in step with its
      // parent, which is created with it): disconnect() then cancels the retry and nothing ever
      // answers or fails the command the tail is waiting on. Without the close racing its
      // commands, this waited until the process ended.
      await withDeadline(
        5_000,
        'a third retry scheduled',
        () =>
          new Promise<void>((resolve) => {
            let retries = 0
            redis.on('reconnecting', () => {
              if (++retries === 3) resolve()
            })
          }),
      )
      await withDeadline(3_000, 'tail close', () => tail.close())
      await withDeadline(100, 'ready after close', () => tail.ready)
      expect(tail.lastId).toBe('0-0')
    } finally {
      redis.disconnect()
    }
  })
})
