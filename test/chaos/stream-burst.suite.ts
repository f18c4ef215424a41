import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { waitFor } from '@threadline/testing'
import { SLOW_FIELDS, startStreamReader, StatusTally, type StreamReader } from './clients.js'
import { findBinaries, MUST_RUN, startStack, type App, type Stack } from './stack.js'

/**
 * Finding of the chaos work (packages/api/src/stream): the SlowReader cut-off judges
 * `res.writableLength` right after writing a whole dispatch synchronously, so a client that reads
 * as fast as it can is cut off whenever one batch from the `stored` stream renders to more than
 * the stream's buffer bound (Posts with expansions are ~2 KB each; a 500-entry read can pass the
 * 4 MB default). Here the bound is 256 KB and one burst of ~150 matching Posts passes it.
 * Expected: a reader that keeps up is never cut off.
 */
const binaries = findBinaries()

describe.skipIf(!binaries.ok && !MUST_RUN)('filtered stream: a reader that keeps up', () => {
  let stack: Stack
  let app: App
  let reader: StreamReader | undefined

  beforeAll(async () => {
    if (!binaries.ok) throw new Error(`the chaos suites cannot run in CI: ${binaries.reason}`)
    stack = await startStack(binaries.bin, {
      simulatorRate: 5,
      writers: 1,
      tuning: { api: { stream: { maxBufferedBytes: 256 * 1024 } } },
    })
    app = await stack.createApp('burst')
    const added = await stack.callApi(app.token, 'POST', '/2/tweets/search/stream/rules', {
      add: [{ value: 'data OR thread OR stream OR post OR reply OR datos OR hilo OR think' }],
    })
    expect(added.status).toBe(201)
  }, 240_000)

  afterAll(async () => {
    await reader?.stop()
    await stack?.close()
  }, 120_000)

  it('is not cut off as a SlowReader when one burst of Posts is large', async () => {
    const tally = new StatusTally()
    reader = startStreamReader({
      apiUrl: stack.apiUrl,
      token: app.token,
      tally,
      query: SLOW_FIELDS,
    })
    await waitFor('the stream to open', () => reader!.connects > 0)
    await waitFor(
      'the ingest to follow the rule upstream',
      async () => {
        const s = await stack.sim<{ rules: number; streamConnections: number }>(
          'GET',
          '/_sim/stats',
        )
        return s.rules > 0 && s.streamConnections === 1
      },
      { timeoutMs: 60_000 },
    )
    const emitted = new Set(
      (await stack.sim<{ ids: string[] }>('POST', '/_sim/emit', { count: 300 })).ids,
    )
    // What of the burst the upstream sent under the app's rule, i.e. what the reader must get.
    const sent = (await stack.sim<{ ids: string[] }>('GET', '/_sim/sent')).ids.filter((id) =>
      emitted.has(id),
    )
    expect(sent.length).toBeGreaterThan(100)
    await waitFor(
      'the burst to reach the reader, or the reader to be cut off',
      () => reader!.disconnectTypes.length > 0 || sent.every((id) => reader!.ids.has(id)),
      { timeoutMs: 60_000 },
    )
    expect(reader.disconnectTypes).toEqual([])
    expect(sent.filter((id) => !reader!.ids.has(id))).toEqual([])
  })
})
