import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, describe, expect, it } from 'vitest'
import { authHint, UpstreamClient } from './upstream.js'

describe('authHint', () => {
  it('names the setting to check on 401 and 403, and nothing otherwise', () => {
    expect(authHint(401, true)).toContain('refused the bearer token: check UPSTREAM_BEARER_TOKEN')
    expect(authHint(401, false)).toContain('no bearer token was sent: set UPSTREAM_BEARER_TOKEN')
    expect(authHint(403, true)).toContain('UPSTREAM_BEARER_TOKEN belongs to an app with access')
    for (const status of [200, 400, 409, 429, 500, 503]) expect(authHint(status, true)).toBe('')
  })
})

describe('UpstreamClient refused by the upstream', () => {
  let server: Server | undefined
  afterEach(
    () => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())),
  )

  /** An upstream that answers every request with `status` and X's problem body. */
  async function refusing(status: number): Promise<string> {
    server = createServer((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/problem+json' })
      res.end(JSON.stringify({ title: 'Unauthorized', type: 'about:blank', status }))
    })
    await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve))
    return `http://127.0.0.1:${(server!.address() as AddressInfo).port}`
  }

  it('says which setting to check when a request is refused for its token', async () => {
    const baseUrl = await refusing(401)
    const withToken = new UpstreamClient({ baseUrl, bearerToken: 'wrong' })
    await expect(withToken.listRules()).rejects.toThrow(
      /answered 401: .*Unauthorized.*check UPSTREAM_BEARER_TOKEN/,
    )
    await expect(withToken.addRules(['conversation_id:1'])).rejects.toThrow(
      /check UPSTREAM_BEARER_TOKEN/,
    )
    const without = new UpstreamClient({ baseUrl })
    await expect(without.lookup(['1'])).rejects.toThrow(/set UPSTREAM_BEARER_TOKEN/)
  })

  it('leaves other failures as the upstream put them', async () => {
    const baseUrl = await refusing(503)
    const client = new UpstreamClient({ baseUrl, bearerToken: 'token' })
    const err = await client.listRules().then(
      () => undefined,
      (e: Error) => e,
    )
    expect(err?.message).toMatch(/answered 503: /)
    expect(err?.message).not.toMatch(/UPSTREAM_BEARER_TOKEN/)
  })
})
