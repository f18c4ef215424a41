import { describe, expect, it } from 'vitest'
import { silentLogger } from '@threadline/logger'
import { UpstreamClient } from '../upstream.js'
import { CompliancePartition } from './streams.js'

/** A partition over a mark held in memory (the real one is a Redis hash). */
function partition(mark: number | undefined, ledSince = Date.now()) {
  const marks = { read: async () => mark }
  const upstream = new UpstreamClient({ baseUrl: 'http://127.0.0.1:1' })
  return new CompliancePartition(
    'tweet-1',
    'tweet',
    1,
    { upstream, marks, logger: silentLogger() },
    ledSince,
  )
}

describe('CompliancePartition.plan: what a connection replays', () => {
  it('asks for nothing on the first connection of a store that never read the stream', async () => {
    const p = partition(undefined)
    expect(await p.plan()).toBe(0)
    expect(p.replayFrom).toBeUndefined()
  })

  it('asks for backfill_minutes=5 after a short gap', async () => {
    const p = partition(Date.now() - 60_000)
    expect(await p.plan()).toBe(5)
    expect(p.replayFrom).toBeUndefined()
  })

  it('replays from the mark less a margin after a longer gap, or once the upstream refused backfill_minutes', async () => {
    const mark = Date.now() - 3_600_000
    const p = partition(mark)
    expect(await p.plan()).toBe(0)
    expect(Date.parse(p.replayFrom!)).toBe(mark - 60_000)

    const refused = partition(Date.now() - 60_000)
    refused.refusedBackfill()
    expect(await refused.plan()).toBe(0)
    expect(Date.parse(refused.replayFrom!)).toBeLessThan(Date.now() - 60_000)
  })

  it('replays since the leadership began after a reconnect without a mark', async () => {
    const ledSince = Date.now() - 10 * 60_000
    const p = partition(undefined, ledSince)
    await p.plan()
    expect(await p.plan()).toBe(0)
    expect(Date.parse(p.replayFrom!)).toBe(ledSince - 60_000)
  })

  it('never reaches back past what X keeps (five days)', async () => {
    const p = partition(Date.now() - 30 * 86_400_000)
    await p.plan()
    expect(Date.parse(p.replayFrom!)).toBeGreaterThan(Date.now() - 5 * 86_400_000 - 1_000)
  })
})
