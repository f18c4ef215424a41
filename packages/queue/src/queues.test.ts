import { Redis as SingleRedis } from 'ioredis'
import { describe, expect, it } from 'vitest'
import { hasHashTag, queuePrefix } from './queues.js'

describe('hash tags', () => {
  it('finds a Redis Cluster hash tag as the cluster does (first {, next }, non-empty)', () => {
    expect(hasHashTag('{threadline}')).toBe(true)
    expect(hasHashTag('tl:{posts}')).toBe(true)
    expect(hasHashTag('threadline')).toBe(false)
    expect(hasHashTag('tl{}')).toBe(false)
    expect(hasHashTag('tl}{')).toBe(false)
    expect(hasHashTag('tl{x')).toBe(false)
  })

  it('leaves the prefix of a single-server connection unchanged', () => {
    // lazyConnect: no connection is opened; only the client's kind matters here.
    const single = new SingleRedis({ lazyConnect: true })
    expect(queuePrefix('threadline', 'posts', single)).toBe('threadline')
    expect(queuePrefix('{tl}', 'activity', single)).toBe('{tl}')
    single.disconnect()
  })
})
