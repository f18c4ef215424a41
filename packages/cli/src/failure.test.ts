import { describe, expect, it } from 'vitest'
import { createRedis } from '@threadline/redis'
import { describeFailure, reachRedis, redisWhere } from './failure.js'

const config = { DATABASE_URL: 'postgres://app:secret@db.internal:6543/threadline' }

describe('describeFailure', () => {
  it('says which service an unreachable address is, without its credentials', () => {
    // pg names the address a host name resolved to; the message names the URL's host and port.
    const refused = Object.assign(new Error('connect ECONNREFUSED ::1:6543'), {
      code: 'ECONNREFUSED',
      address: '::1',
      port: 6543,
    })
    expect(describeFailure(refused, { DATABASE_URL: 'postgres://a:b@localhost:6543/x' })).toBe(
      'cannot reach Postgres at localhost:6543 (DATABASE_URL): connect ECONNREFUSED ::1:6543',
    )
    const unknownHost = Object.assign(new Error('getaddrinfo ENOTFOUND db.internal'), {
      code: 'ENOTFOUND',
    })
    const text = describeFailure(unknownHost, config)
    expect(text).toBe(
      'cannot reach Postgres at db.internal:6543 (DATABASE_URL): getaddrinfo ENOTFOUND db.internal',
    )
    expect(text).not.toContain('secret')
  })

  it('names the fix when Postgres refuses the user or password, without the password', () => {
    const refused = Object.assign(new Error('password authentication failed for user "app"'), {
      code: '28P01',
    })
    const text = describeFailure(refused, config)
    expect(text).toMatch(/^Postgres at db.internal:6543 refused user "app" \(DATABASE_URL\)/)
    expect(text).toMatch(/postgres:\/\/USER:PASSWORD@host:port\/threadline/)
    expect(text).toMatch(/pg_hba\.conf/)
    expect(text).not.toContain('secret')
  })

  it('points a missing database at migrate, and leaves other errors as they are', () => {
    const missing = Object.assign(new Error('database "threadline" does not exist'), {
      code: '3D000',
    })
    expect(describeFailure(missing, config)).toBe(
      'database "threadline" does not exist: run "threadline migrate" (it creates the database), or check DATABASE_URL',
    )
    // Another service's address (Redis, the upstream) is not called Postgres.
    const other = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), {
      code: 'ECONNREFUSED',
      address: '127.0.0.1',
      port: 6379,
    })
    expect(describeFailure(other, config)).toBe('connect ECONNREFUSED 127.0.0.1:6379')
    expect(describeFailure(new Error('boom'), undefined)).toBe('boom')
  })
})

describe('reachRedis', () => {
  it('fails within its deadline, naming where Redis was looked for and why it failed', async () => {
    // Nothing listens on port 1: every attempt is refused, and a worker connection retries forever.
    const target = { REDIS_URL: 'redis://:pw@127.0.0.1:1' }
    const redis = createRedis(target, 'worker', 'test')
    try {
      await expect(reachRedis(redis, target, 500)).rejects.toThrow(
        'cannot reach Redis at 127.0.0.1:1 (REDIS_URL): connect ECONNREFUSED 127.0.0.1:1',
      )
    } finally {
      redis.disconnect()
    }
  })

  it('lists cluster seeds when the configuration names them', () => {
    expect(
      redisWhere({
        REDIS_URL: 'redis://127.0.0.1:6379',
        REDIS_CLUSTER_NODES: [
          { host: 'r1', port: 7000 },
          { host: 'r2', port: 7001 },
        ],
      }),
    ).toBe('r1:7000,r2:7001 (REDIS_CLUSTER_NODES)')
  })
})
