import { describe, expect, it } from 'vitest'
import {
  csvField,
  formatExport,
  jsonlLine,
  xmlText,
  type ExportRow,
  type ExportSource,
} from './conversation-export.js'

const row = (over: Partial<ExportRow>): ExportRow => ({
  id: '10',
  depth: 0,
  stored_reply_count: 0,
  descendant_count: 0,
  conversation_id: '10',
  author_id: '1',
  author_username: 'a',
  created_at: '2026-11-20T10:00:00.000Z',
  text: 'hi',
  lang: 'en',
  reply_count: 0,
  like_count: 0,
  retweet_count: 0,
  quote_count: 0,
  quoted_id: null,
  ...over,
})

async function text(chunks: AsyncIterable<string>): Promise<string> {
  let all = ''
  for await (const c of chunks) all += c
  return all
}

const source = (rows: ExportRow[], missing: string[] = []): ExportSource => ({
  conversationId: '10',
  missingParents: missing,
  contains: (id) => rows.some((r) => r.id === id),
  pages: (async function* () {
    yield rows.slice(0, 1)
    yield rows.slice(1)
  })(),
})

describe('csv', () => {
  it('quotes only the fields that need it, doubling quotes (RFC 4180)', () => {
    expect(csvField('plain')).toBe('plain')
    expect(csvField('a,b')).toBe('"a,b"')
    expect(csvField('say "hi"')).toBe('"say ""hi"""')
    expect(csvField('two\nlines')).toBe('"two\nlines"')
    expect(csvField('cr\r')).toBe('"cr\r"')
    expect(csvField(null)).toBe('')
    expect(csvField(0)).toBe('0')
  })

  it('writes a header and one CRLF record per row', async () => {
    const out = await text(
      formatExport('csv', source([row({}), row({ id: '11', parent_id: '10', depth: 1 })])),
    )
    const lines = out.split('\r\n')
    expect(lines[0]!.startsWith('id,conversation_id,parent_id,depth,author_id,')).toBe(true)
    expect(lines[2]).toBe('11,10,10,1,1,a,2026-11-20T10:00:00.000Z,hi,0,0,0,0,,en,false,0,0')
    expect(lines).toHaveLength(4)
  })
})

describe('graphml', () => {
  it('escapes markup and replaces what XML cannot hold', () => {
    expect(xmlText('a<b>&"c"')).toBe('a&lt;b&gt;&amp;&quot;c&quot;')
    expect(xmlText('bell\u0007 tab\t nl\n cr\r')).toBe('bell\uFFFD tab\t nl\n cr&#13;')
    expect(xmlText('lone \uD800 pair \uD83D\uDE00')).toBe('lone \uFFFD pair \uD83D\uDE00')
  })

  it('names missing parents before the edges, and quotes only between nodes of the file', async () => {
    const out = await text(
      formatExport(
        'graphml',
        source(
          [
            row({ quoted_id: '12' }),
            row({ id: '11', depth: 1, parent_id: '9', missing_parent: true, quoted_id: '99' }),
            row({ id: '12', depth: 1, parent_id: '10', quoted_id: '9' }),
          ],
          ['9'],
        ),
      ),
    )
    const missing = out.indexOf('<node id="9"><data key="missing">true</data></node>')
    expect(missing).toBeGreaterThan(0)
    expect(missing).toBeLessThan(out.indexOf('<edge source="11" target="9">'))
    expect(out).toContain('<edge source="10" target="12"><data key="type">quote</data></edge>')
    expect(out).toContain('<edge source="12" target="9"><data key="type">quote</data></edge>')
    expect(out).not.toContain('target="99"')
    expect(out.endsWith('</graph>\n</graphml>\n')).toBe(true)
  })
})

describe('jsonl', () => {
  it("is the row's stream line, one a line", () => {
    const line = '{"data":{"id":"11","text":"x"},"includes":{"users":[{"id":"1"}]}}'
    expect(jsonlLine(row({ line }))).toBe(`${line}\n`)
    expect(() => jsonlLine(row({}))).toThrow(/without its line/)
  })
})
