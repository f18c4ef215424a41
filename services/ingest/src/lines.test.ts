import { describe, expect, it } from 'vitest'
import { LineSplitter, LineTooLongError } from './lines.js'

describe('LineSplitter', () => {
  it('splits on \\r\\n and keeps blank keep-alive lines', () => {
    const s = new LineSplitter()
    expect(s.push('{"a":1}\r\n\r\n{"b":2}\r\n')).toEqual(['{"a":1}', '', '{"b":2}'])
    expect(s.end()).toBeUndefined()
  })

  it('joins lines across chunks, including a \\r\\n split in two', () => {
    const s = new LineSplitter()
    expect(s.push('{"a"')).toEqual([])
    expect(s.push(':1}\r')).toEqual([])
    expect(s.push('\n{"b":2}')).toEqual(['{"a":1}'])
    expect(s.end()).toBe('{"b":2}')
  })

  it('does not split on a bare \\n', () => {
    const s = new LineSplitter()
    expect(s.push('a\nb\r\n')).toEqual(['a\nb'])
  })

  it('decodes multi-byte characters split across chunks', () => {
    const bytes = new TextEncoder().encode('{"t":"héllo 🧵"}\r\n')
    const s = new LineSplitter()
    const out: string[] = []
    for (let i = 0; i < bytes.length; i++) out.push(...s.push(bytes.subarray(i, i + 1)))
    expect(out).toEqual(['{"t":"héllo 🧵"}'])
  })
})

describe('LineSplitter bounds', () => {
  it('assembles a long line from many small chunks, and a \\r\\n split across chunks', () => {
    const splitter = new LineSplitter()
    const line = 'x'.repeat(10_000)
    const out: string[] = []
    for (let i = 0; i < line.length; i += 7) out.push(...splitter.push(line.slice(i, i + 7)))
    out.push(...splitter.push('\r'))
    expect(out).toEqual([])
    expect(splitter.push('\nnext\r\n')).toEqual([line, 'next'])
  })

  it('refuses a line past its bound instead of buffering without end', () => {
    const splitter = new LineSplitter(100)
    expect(splitter.push('a'.repeat(60))).toEqual([])
    expect(() => splitter.push('b'.repeat(60))).toThrow(LineTooLongError)
    // After the error the splitter holds nothing of that line.
    expect(splitter.push('ok\r\n')).toEqual(['ok'])
  })
})
