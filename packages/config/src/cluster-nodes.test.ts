import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './index.js'

describe('REDIS_CLUSTER_NODES and DATABASE_READ_URL', () => {
  it('are unset by default: one Redis server, reads from DATABASE_URL', () => {
    const config = loadConfig({})
    expect(config.REDIS_CLUSTER_NODES).toBeUndefined()
    expect(config.DATABASE_READ_URL).toBeUndefined()
  })

  it('parses cluster seeds, IPv6 in brackets included', () => {
    expect(
      loadConfig({ REDIS_CLUSTER_NODES: '127.0.0.1:7000, redis-1:7001,[::1]:7002' })
        .REDIS_CLUSTER_NODES,
    ).toEqual([
      { host: '127.0.0.1', port: 7000 },
      { host: 'redis-1', port: 7001 },
      { host: '::1', port: 7002 },
    ])
  })

  it('names the variable at fault', () => {
    for (const bad of ['redis-1', 'redis-1:0', 'redis-1:99999', 'a:1,,b:2', 'redis://a:1']) {
      expect(() => loadConfig({ REDIS_CLUSTER_NODES: bad })).toThrow(/REDIS_CLUSTER_NODES/)
    }
    expect(() => loadConfig({ DATABASE_READ_URL: 'http://replica' })).toThrow(ConfigError)
  })
})
