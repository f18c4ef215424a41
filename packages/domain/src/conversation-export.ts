/**
 * A conversation as files for the tools researchers use (docs/api.md §5): `jsonl` (re-importable),
 * `csv` (RFC 4180) and `graphml` (networkx, Gephi). Pure: the formatters turn pages of rows, in
 * tree order, into text, one chunk per page, so an export of any size is written in bounded memory.
 */

export const EXPORT_FORMATS = ['jsonl', 'csv', 'graphml'] as const
export type ExportFormat = (typeof EXPORT_FORMATS)[number]

export const EXPORT_CONTENT_TYPES: Record<ExportFormat, string> = {
  jsonl: 'application/x-ndjson',
  csv: 'text/csv; charset=utf-8',
  graphml: 'application/graphml+xml',
}

/** One stored Post of an export, with its place in the tree. */
export interface ExportRow {
  id: string
  depth: number
  /** The Post it replies to (absent on the root). */
  parent_id?: string
  /** True when that parent is not stored. */
  missing_parent?: boolean
  /** Replies to it that are stored, and Posts stored below it. */
  stored_reply_count: number
  descendant_count: number
  conversation_id: string | null
  author_id: string | null
  author_username: string | null
  /** `YYYY-MM-DDTHH:MM:SS.mmmZ`. */
  created_at: string
  text: string
  lang: string | null
  reply_count: number | null
  like_count: number | null
  retweet_count: number | null
  quote_count: number | null
  quoted_id: string | null
  /**
   * Set when X withdrew the Post: it has no content (author, text and counts are null), jsonl and
   * csv leave it out and graphml keeps its node (docs/api.md §7).
   */
  withdrawn?: 'deleted' | 'unavailable'
  /**
   * jsonl only: the Post's filtered-stream message (X's `{"data", "includes"}` with its author and
   * the Posts it references), as the read pipeline presents it.
   */
  line?: string
}

export interface ExportSource {
  conversationId: string
  /** Parents referenced by orphans and not stored, each once. */
  missingParents: readonly string[]
  /** True when a Post is one of the export's rows. */
  contains(id: string): boolean
  /** The rows in tree order (pre-order, oldest replies first), a page at a time. */
  pages: AsyncIterable<readonly ExportRow[]>
}

/** The export of one conversation in one format, as chunks of text. */
export function formatExport(format: ExportFormat, source: ExportSource): AsyncIterable<string> {
  switch (format) {
    case 'jsonl':
      return jsonl(source)
    case 'csv':
      return csv(source)
    case 'graphml':
      return graphml(source)
  }
}

// --- jsonl ---

/**
 * `{"data": Post, "includes": {"users": [author], "tweets": [referenced]}}`: a filtered-stream line,
 * which `threadline import` stores as it stores the stream's.
 */
export function jsonlLine(row: ExportRow): string {
  if (row.line === undefined) throw new Error(`row ${row.id} was read without its line`)
  return `${row.line}\n`
}

async function* jsonl(source: ExportSource): AsyncGenerator<string> {
  for await (const page of source.pages) {
    let chunk = ''
    for (const row of page) if (!row.withdrawn) chunk += jsonlLine(row)
    if (chunk !== '') yield chunk
  }
}

// --- csv ---

export const CSV_COLUMNS = [
  'id',
  'conversation_id',
  'parent_id',
  'depth',
  'author_id',
  'author_username',
  'created_at',
  'text',
  'reply_count',
  'like_count',
  'retweet_count',
  'quote_count',
  'quoted_id',
  'lang',
  'missing_parent',
  'stored_reply_count',
  'descendant_count',
] as const

/** One RFC 4180 field: quoted when it holds a quote, a comma or a line break. */
export function csvField(value: string | number | boolean | null | undefined): string {
  if (value === null || value === undefined) return ''
  const text = String(value)
  return /[",\r\n]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text
}

export function csvRecord(row: ExportRow): string {
  return (
    [
      row.id,
      row.conversation_id,
      row.parent_id,
      row.depth,
      row.author_id,
      row.author_username,
      row.created_at,
      row.text,
      row.reply_count,
      row.like_count,
      row.retweet_count,
      row.quote_count,
      row.quoted_id,
      row.lang,
      row.missing_parent === true,
      row.stored_reply_count,
      row.descendant_count,
    ]
      .map(csvField)
      .join(',') + '\r\n'
  )
}

async function* csv(source: ExportSource): AsyncGenerator<string> {
  yield CSV_COLUMNS.join(',') + '\r\n'
  for await (const page of source.pages) {
    let chunk = ''
    for (const row of page) if (!row.withdrawn) chunk += csvRecord(row)
    if (chunk !== '') yield chunk
  }
}

// --- graphml ---

/** Characters XML 1.0 does not allow (control characters, lone surrogates, U+FFFE/F). */
const NOT_XML =
  // eslint-disable-next-line no-control-regex
  /[\u0000-\u0008\u000B\u000C\u000E-\u001F\uFFFE\uFFFF]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g
const XML_ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  // A literal CR would be read back as LF (XML end-of-line handling).
  '\r': '&#13;',
}

/** Text for element content or an attribute value; what XML cannot hold becomes U+FFFD. */
export function xmlText(value: string): string {
  return value.replace(NOT_XML, '\uFFFD').replace(/[&<>"\r]/g, (c) => XML_ESCAPES[c]!)
}

const GRAPHML_HEAD = `<?xml version="1.0" encoding="UTF-8"?>
<graphml xmlns="http://graphml.graphdrawing.org/xmlns" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:schemaLocation="http://graphml.graphdrawing.org/xmlns http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd">
  <key id="author_id" for="node" attr.name="author_id" attr.type="string"/>
  <key id="username" for="node" attr.name="username" attr.type="string"/>
  <key id="created_at" for="node" attr.name="created_at" attr.type="string"/>
  <key id="text" for="node" attr.name="text" attr.type="string"/>
  <key id="depth" for="node" attr.name="depth" attr.type="int"/>
  <key id="withdrawn" for="node" attr.name="withdrawn" attr.type="string"/>
  <key id="missing" for="node" attr.name="missing" attr.type="boolean">
    <default>false</default>
  </key>
  <key id="type" for="edge" attr.name="type" attr.type="string"/>
`

const data = (key: string, value: string | number | null) =>
  value === null
    ? ''
    : `<data key="${key}">${typeof value === 'number' ? value : xmlText(value)}</data>`

function graphmlNode(row: ExportRow): string {
  if (row.withdrawn) {
    return (
      `    <node id="${row.id}">` +
      data('created_at', row.created_at) +
      data('depth', row.depth) +
      data('withdrawn', row.withdrawn) +
      '<data key="missing">false</data></node>\n'
    )
  }
  return (
    `    <node id="${row.id}">` +
    data('author_id', row.author_id) +
    data('username', row.author_username) +
    data('created_at', row.created_at) +
    data('text', row.text) +
    data('depth', row.depth) +
    '<data key="missing">false</data></node>\n'
  )
}

const graphmlEdge = (source: string, target: string, type: 'reply' | 'quote') =>
  `    <edge source="${source}" target="${target}"><data key="type">${type}</data></edge>\n`

/**
 * Nodes come before the edges that name them (some readers need it): missing parents first, then
 * each Post with the edge to its parent (earlier in pre-order, or missing); quote edges, whose
 * quoted Post may come later, close the graph.
 */
async function* graphml(source: ExportSource): AsyncGenerator<string> {
  let head = GRAPHML_HEAD + `  <graph id="${source.conversationId}" edgedefault="directed">\n`
  const missing = new Set(source.missingParents)
  for (const id of missing) head += `    <node id="${id}"><data key="missing">true</data></node>\n`
  yield head
  const quotes: Array<[string, string]> = []
  for await (const page of source.pages) {
    let chunk = ''
    for (const row of page) {
      chunk += graphmlNode(row)
      if (row.parent_id !== undefined) chunk += graphmlEdge(row.id, row.parent_id, 'reply')
      const quoted = row.quoted_id
      if (quoted !== null && (source.contains(quoted) || missing.has(quoted))) {
        quotes.push([row.id, quoted])
      }
    }
    if (chunk !== '') yield chunk
  }
  let tail = ''
  for (const [from, to] of quotes) tail += graphmlEdge(from, to, 'quote')
  yield tail + '  </graph>\n</graphml>\n'
}
