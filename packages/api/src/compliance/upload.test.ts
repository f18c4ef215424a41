import { describe, expect, it } from 'vitest'
import { compliancePartition } from './partition.js'
import { UploadRefusedError, uploadedIdChunks } from './upload.js'

async function* pieces(...parts: string[]) {
  for (const p of parts) yield Buffer.from(p)
}

const collect = async (body: AsyncIterable<Buffer>, chunkIds = 3, maxIds = 100, maxBytes = 1e6) => {
  const out: string[][] = []
  for await (const c of uploadedIdChunks(body, { chunkIds, maxIds, maxBytes })) out.push(c)
  return out
}

describe('uploadedIdChunks', () => {
  it('reads ids across pieces split mid-line, in chunks, tolerating CRLF, blanks and spaces', async () => {
    const got = await collect(pieces('1\r\n22', '2\n\n  333 \n4', '444\n5', '\n6'))
    expect(got).toEqual([
      ['1', '222', '333'],
      ['4444', '5', '6'],
    ])
  })

  it('refuses the first line that is not an id, naming it', async () => {
    await expect(collect(pieces('1\n2\n', 'x3\n4\n'))).rejects.toThrow(
      'line 3 of the upload is not an id (one id of 1 to 19 digits a line): "x3"',
    )
    // An id past the signed 64-bit range is not one.
    await expect(collect(pieces('9223372036854775808\n'))).rejects.toThrow(/line 1/)
    // A line that never ends is refused without being held.
    const long = collect(pieces('1\n', '9'.repeat(70)))
    await expect(long).rejects.toThrow('line 2 of the upload is not an id: it runs past')
  })

  it('refuses past the id and byte limits with a 413', async () => {
    const tooMany = collect(pieces('1\n2\n3\n'), 3, 2)
    await expect(tooMany).rejects.toMatchObject({ status: 413 })
    const tooBig = collect(pieces('1\n2\n3\n'), 3, 100, 4)
    await expect(tooBig).rejects.toBeInstanceOf(UploadRefusedError)
  })
})

describe('compliancePartition', () => {
  it('spreads snowflake ids over the four partitions', () => {
    const counts = [0, 0, 0, 0]
    // Snowflakes of one worker with sequence 0: the id alone would put all in one partition.
    for (let ms = 0n; ms < 4000n; ms++) {
      const id = (((1_700_000_000_000n + ms * 997n - 1288834974657n) << 22n) | 0n).toString()
      counts[compliancePartition(id) - 1]! += 1
    }
    for (const n of counts) expect(n).toBeGreaterThan(800)
    expect(compliancePartition('20')).toBe(compliancePartition('20'))
  })
})
