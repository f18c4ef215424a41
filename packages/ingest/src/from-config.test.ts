import { describe, expect, it } from 'vitest'
import { loadConfig } from '@threadline/config'
import { ingestOptionsFromConfig, MissingUpstreamError } from './from-config.js'

describe('ingestOptionsFromConfig', () => {
  it('says UPSTREAM_URL is missing rather than starting without an upstream', () => {
    expect(() => ingestOptionsFromConfig(loadConfig({}))).toThrow(MissingUpstreamError)
    expect(() => ingestOptionsFromConfig(loadConfig({}))).toThrow(/UPSTREAM_URL is not set/)
  })

  it('takes the upstream and its token from configuration', () => {
    const options = ingestOptionsFromConfig(
      loadConfig({ UPSTREAM_URL: 'http://x.example', UPSTREAM_BEARER_TOKEN: 't' }),
    )
    expect(options).toMatchObject({ upstreamUrl: 'http://x.example', upstreamBearerToken: 't' })
  })
})
