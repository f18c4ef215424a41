import { describe, expect, it } from 'vitest'
import { ConfigError, loadConfig } from './index.js'

describe('loadConfig', () => {
  it('has defaults that work against local services', () => {
    const config = loadConfig({})
    expect(config.DATABASE_URL).toBe('postgres://postgres@127.0.0.1:5432/threadline')
    expect(config.REDIS_URL).toBe('redis://127.0.0.1:6379')
    expect(config.PORT).toBe(3000)
    expect(config.WEBHOOK_ALLOW_PRIVATE).toBe(false)
    expect(config.UPSTREAM_URL).toBeUndefined()
  })

  it('does not read "false" as true', () => {
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'false' }).WEBHOOK_ALLOW_PRIVATE).toBe(false)
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'TRUE' }).WEBHOOK_ALLOW_PRIVATE).toBe(true)
  })

  it('names the variable at fault', () => {
    expect(() => loadConfig({ PORT: 'eighty', REDIS_URL: 'http://x' })).toThrow(ConfigError)
    const thrown = (() => {
      try {
        loadConfig({ PORT: 'eighty', WEBHOOK_ALLOW_PRIVATE: 'maybe' })
      } catch (err) {
        return err
      }
      return undefined
    })()
    expect(thrown).toBeInstanceOf(ConfigError)
    expect((thrown as ConfigError).problems.join('\n')).toMatch(/PORT/)
    expect((thrown as ConfigError).problems.join('\n')).toMatch(/WEBHOOK_ALLOW_PRIVATE/)
  })

  it('reads API_TRUSTED_PROXIES as addresses and CIDR ranges', () => {
    expect(loadConfig({}).API_TRUSTED_PROXIES).toEqual([])
    expect(
      loadConfig({ API_TRUSTED_PROXIES: '10.0.0.0/8, 192.168.1.7,::1,fd00::/8' }),
    ).toMatchObject({ API_TRUSTED_PROXIES: ['10.0.0.0/8', '192.168.1.7', '::1', 'fd00::/8'] })
    for (const bad of ['10.0.0.0/33', 'proxy.local', '10.0.0.1/8/8', '::1/129', '10.0.0.0/']) {
      expect(() => loadConfig({ API_TRUSTED_PROXIES: bad }), bad).toThrow(/API_TRUSTED_PROXIES/)
    }
  })

  it('reads API_RATE_LIMITS per endpoint group, keeping the defaults of groups it does not name', () => {
    expect(loadConfig({}).API_RATE_LIMITS).toEqual({
      lookup: 3_500,
      search: 450,
      counts: 300,
      rules: 450,
    })
    expect(loadConfig({ API_RATE_LIMITS: 'search:1000, rules=5' }).API_RATE_LIMITS).toEqual({
      lookup: 3_500,
      search: 1_000,
      counts: 300,
      rules: 5,
    })
    for (const bad of ['search', 'likes:5', 'search:0', 'search:-1', 'search:ten']) {
      expect(() => loadConfig({ API_RATE_LIMITS: bad }), bad).toThrow(/API_RATE_LIMITS/)
    }
  })
})

describe('compliance settings', () => {
  it('default to batch jobs every 12 hours of at most 100,000 ids', () => {
    const config = loadConfig({})
    expect(config.UPSTREAM_COMPLIANCE).toBe('jobs')
    expect(config.COMPLIANCE_INTERVAL_HOURS).toBe(12)
    expect(config.COMPLIANCE_JOB_MAX_IDS).toBe(100_000)
  })

  it('refuse a mode they do not know and an interval past X’s 24 hours', () => {
    expect(loadConfig({ UPSTREAM_COMPLIANCE: 'stream' }).UPSTREAM_COMPLIANCE).toBe('stream')
    expect(() => loadConfig({ UPSTREAM_COMPLIANCE: 'hourly' })).toThrow(/UPSTREAM_COMPLIANCE/)
    expect(() => loadConfig({ COMPLIANCE_INTERVAL_HOURS: '24' })).toThrow(
      /COMPLIANCE_INTERVAL_HOURS/,
    )
    expect(() => loadConfig({ COMPLIANCE_JOB_MAX_IDS: '0' })).toThrow(/COMPLIANCE_JOB_MAX_IDS/)
  })
})
