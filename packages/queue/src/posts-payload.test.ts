import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { lineText, splitLineBytes } from './posts-payload.js'

const texts = (buffer: Buffer) => splitLineBytes(buffer).map(lineText)

describe('splitLineBytes', () => {
  it('gives back the lines joined by \\r\\n, whatever their characters', () => {
    const line = fc
      .string({ unit: 'binary' })
      // A line never holds the separator (addPostsBatch keeps such batches inline).
      .filter((l) => !l.includes('\r\n') && !l.endsWith('\r') && !l.startsWith('\n'))
    fc.assert(
      fc.property(fc.array(line, { minLength: 1 }), (lines) => {
        const buffer = Buffer.from(lines.join('\r\n'), 'utf8')
        expect(texts(buffer)).toEqual(buffer.toString('utf8').split('\r\n'))
      }),
    )
  })

  it('keeps empty lines, and an empty payload is one empty line', () => {
    expect(texts(Buffer.from('a\r\n\r\nb\r\n'))).toEqual(['a', '', 'b', ''])
    expect(texts(Buffer.alloc(0))).toEqual([''])
  })

  it('gives views of the payload, not copies', () => {
    const buffer = Buffer.from('ab\r\ncd')
    const [first] = splitLineBytes(buffer)
    buffer[0] = 0x78 // 'x'
    expect(lineText(first!)).toBe('xb')
  })
})
