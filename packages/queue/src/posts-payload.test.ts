import { describe, expect, it } from 'vitest'
import fc from 'fast-check'
import { splitLines } from './posts-payload.js'

describe('splitLines', () => {
  it('gives back the lines joined by \\r\\n, whatever their characters', () => {
    const line = fc
      .string({ unit: 'binary' })
      // A line never holds the separator (addPostsBatch keeps such batches inline).
      .filter((l) => !l.includes('\r\n') && !l.endsWith('\r') && !l.startsWith('\n'))
    fc.assert(
      fc.property(fc.array(line, { minLength: 1 }), (lines) => {
        const buffer = Buffer.from(lines.join('\r\n'), 'utf8')
        expect(splitLines(buffer)).toEqual(buffer.toString('utf8').split('\r\n'))
      }),
    )
  })

  it('keeps empty lines, and an empty payload is one empty line', () => {
    expect(splitLines(Buffer.from('a\r\n\r\nb\r\n'))).toEqual(['a', '', 'b', ''])
    expect(splitLines(Buffer.alloc(0))).toEqual([''])
  })
})
