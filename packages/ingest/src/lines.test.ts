import { describe, expect, it } from 'vitest'
import { LineSplitter, LineTooLongError } from './lines.js'

const text = (lines: Buffer[]) => lines.map((l) => l.toString('utf8'))

describe('LineSplitter', () => {
  it('splits on \\r\\n and keeps blank keep-alive lines', () => {
    const s = new LineSplitter()
    expect(text(s.push('{"a":1}\r\n\r\n{"b":2}\r\n'))).toEqual(['{"a":1}', '', '{"b":2}'])
    expect(s.end()).toBeUndefined()
  })

  it('joins lines across chunks, including a \\r\\n split in two', () => {
    const s = new LineSplitter()
    expect(s.push('{"a"')).toEqual([])
    expect(s.push(':1}\r')).toEqual([])
    expect(text(s.push('\n{"b":2}'))).toEqual(['{"a":1}'])
    expect(s.end()?.toString()).toBe('{"b":2}')
  })

  it('does not split on a bare \\n or a bare \\r', () => {
    const s = new LineSplitter()
    expect(text(s.push('a\nb\r\n'))).toEqual(['a\nb'])
    // A chunk ending in \r followed by one that does not start with \n: no line break.
    expect(s.push('c\r')).toEqual([])
    expect(text(s.push('d\r\n'))).toEqual(['c\rd'])
  })

  it('keeps multi-byte characters split across chunks intact', () => {
    const bytes = new TextEncoder().encode('{"t":"héllo 🧵"}\r\n')
    const s = new LineSplitter()
    const out: Buffer[] = []
    for (let i = 0; i < bytes.length; i++) out.push(...s.push(bytes.subarray(i, i + 1)))
    expect(text(out)).toEqual(['{"t":"héllo 🧵"}'])
  })

  it('gives a line within one chunk as a view of it, not a copy', () => {
    const chunk = Buffer.from('one\r\ntwo\r\n')
    const [one] = new LineSplitter().push(chunk)
    expect(one!.buffer).toBe(chunk.buffer)
  })
})

describe('LineSplitter bounds', () => {
  it('assembles a long line from many small chunks, and a \\r\\n split across chunks', () => {
    const splitter = new LineSplitter()
    const line = 'x'.repeat(10_000)
    const out: Buffer[] = []
    for (let i = 0; i < line.length; i += 7) out.push(...splitter.push(line.slice(i, i + 7)))
    out.push(...splitter.push('\r'))
    expect(out).toEqual([])
    expect(text(splitter.push('\nnext\r\n'))).toEqual([line, 'next'])
  })

  it('refuses a line past its bound instead of buffering without end', () => {
    const splitter = new LineSplitter(100)
    expect(splitter.push('a'.repeat(60))).toEqual([])
    expect(() => splitter.push('b'.repeat(60))).toThrow(LineTooLongError)
    // After the error the splitter holds nothing of that line.
    expect(text(splitter.push('ok\r\n'))).toEqual(['ok'])
  })
})
