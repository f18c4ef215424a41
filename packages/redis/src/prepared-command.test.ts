import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { PreparedCommand, requestBytes } from './prepared-command.js'

/** The arguments of a RESP request, read back. */
function parseRequest(bytes: Buffer): string[] {
  const text = bytes.toString('latin1')
  const head = /^\*(\d+)\r\n/.exec(text)!
  let at = head[0].length
  const args: string[] = []
  for (let i = 0; i < Number(head[1]); i++) {
    const m = /^\$(\d+)\r\n/.exec(text.slice(at))!
    at += m[0].length
    const length = Number(m[1])
    args.push(bytes.subarray(at, at + length).toString('utf8'))
    expect(text.slice(at + length, at + length + 2)).toBe('\r\n')
    at += length + 2
  }
  expect(at).toBe(bytes.length)
  return args
}

describe('requestBytes', () => {
  it('frames any text, bytes or parts as the arguments of one request', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.oneof(
            fc.string({ unit: 'grapheme' }).map((s) => ({ text: s, arg: s })),
            fc.string({ unit: 'grapheme' }).map((s) => ({ text: s, arg: Buffer.from(s) })),
            fc.tuple(fc.string({ unit: 'grapheme' }), fc.nat()).map(([s, n]) => {
              const b = Buffer.from(s)
              const cut = b.length === 0 ? 0 : n % b.length
              return { text: s, arg: [b.subarray(0, cut), b.subarray(cut)] }
            }),
          ),
          { minLength: 1 },
        ),
        (items) => {
          expect(parseRequest(requestBytes(items.map((i) => i.arg)))).toEqual(
            items.map((i) => i.text),
          )
        },
      ),
    )
  })
})

describe('PreparedCommand', () => {
  it('writes its request as made, and routes by its key', () => {
    const command = new PreparedCommand('xadd', [
      'k:stored',
      '*',
      'post:1',
      [Buffer.from('{"a":'), Buffer.from('1}')],
    ])
    expect(parseRequest(command.toWritable())).toEqual([
      'xadd',
      'k:stored',
      '*',
      'post:1',
      '{"a":1}',
    ])
    expect(command.getKeys()).toEqual(['k:stored'])
    expect(() => new PreparedCommand('xadd', [Buffer.from('k')])).toThrow(/key must be text/)
  })
})
