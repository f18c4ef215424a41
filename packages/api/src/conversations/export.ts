import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { readExportRows, readPostsJson, type Db, type ExportPlace } from '@threadline/db'
import {
  EXPORT_CONTENT_TYPES,
  formatExport,
  notFound,
  type ExportFormat,
  type ExportRow,
} from '@threadline/domain'
import { addRoute, type Endpoint } from '../routes/route.js'
import { CONVERSATION_EXPORT_PARAMS } from '../specs.js'
import type { ServerContext } from '../types.js'

/** Rows read and formatted at a time: what an export holds in memory besides its tree. */
const EXPORT_PAGE = 1_000
/**
 * Pages read at once, ahead of the one being written: the reads are random index probes
 * (a conversation's Posts are spread over the table), which Postgres runs side by side.
 */
const READS_AHEAD = 3

/** What an export needs of a conversation's tree (pre-order positions, `sort=oldest`). */
export interface ExportTree {
  conversationId: string
  size: number
  idAt(position: number): string
  threadAt(position: number): Omit<ExportPlace, 'id'>
  missingParentAt(position: number): string | undefined
  positionOf(id: string): number | undefined
}

export interface ConversationExport {
  format: ExportFormat
  contentType: string
  /** A name for the file: `conversation-<id>.<format>`. */
  filename: string
  chunks: AsyncIterable<string>
}

/**
 * A conversation's export (docs/api.md §5) in tree order, read a page at a time with the next
 * pages read while this one is written, so memory stays bounded whatever the size. The same bytes
 * for `GET /2/conversations/:id/export` and `threadline export`.
 */
export function exportConversation(
  db: Db,
  tree: ExportTree,
  format: ExportFormat,
  onProgress?: (done: number, total: number) => void,
): ConversationExport {
  const missing = new Set<string>()
  for (let p = 0; p < tree.size; p++) {
    const parent = tree.missingParentAt(p)
    if (parent !== undefined) missing.add(parent)
  }
  const json = format === 'jsonl'
  const read = (from: number): Promise<ExportRow[]> => {
    const places: ExportPlace[] = []
    for (let p = from; p < Math.min(from + EXPORT_PAGE, tree.size); p++) {
      places.push({ id: tree.idAt(p), ...tree.threadAt(p) })
    }
    const rows = readExportRows(db, places, { json })
    // A read started ahead must not reject unobserved if the consumer stops first.
    rows.catch(() => undefined)
    return rows
  }
  const path = json ? new AncestorPath() : undefined
  async function* pages(): AsyncGenerator<ExportRow[]> {
    const ahead: Array<Promise<ExportRow[]>> = []
    let next = 0
    const fill = () => {
      while (ahead.length < READS_AHEAD && next < tree.size) {
        ahead.push(read(next))
        next += EXPORT_PAGE
      }
    }
    fill()
    for (let done = 0; ahead.length > 0;) {
      const page = await ahead.shift()!
      fill()
      if (path) await path.resolve(db, page)
      yield page
      done = Math.min(done + EXPORT_PAGE, tree.size)
      onProgress?.(done, tree.size)
    }
  }
  return {
    format,
    contentType: EXPORT_CONTENT_TYPES[format],
    filename: `conversation-${tree.conversationId}.${format}`,
    chunks: formatExport(format, {
      conversationId: tree.conversationId,
      missingParents: [...missing],
      contains: (id) => tree.positionOf(id) !== undefined,
      pages: pages(),
    }),
  }
}

/**
 * The JSON of the Posts a jsonl line includes. In pre-order a reply's parent is the ancestor one
 * level up, so the Posts on the path from the root are kept (as many as the tree is deep) and the
 * parents are never read twice; the rest (quotes, retweets) are read a page at a time.
 */
class AncestorPath {
  /** The Posts on the path, root first: `path[d]` is the ancestor at depth d. */
  private readonly path: Array<{ id: string; post: string } | undefined> = []
  private readonly depthOf = new Map<string, number>()

  async resolve(db: Db, page: ExportRow[]): Promise<void> {
    // A withdrawn Post has no json: it includes nothing and is included by none.
    const inPage = new Map(page.flatMap((r) => (r.json ? [[r.id, r.json.post] as const] : [])))
    const wanted = new Set<string>()
    for (const row of page) {
      for (const ref of row.json?.refs ?? []) {
        if (!inPage.has(ref) && !this.depthOf.has(ref)) wanted.add(ref)
      }
    }
    const found = await readPostsJson(db, [...wanted])
    for (const row of page) {
      if (row.json)
        row.json.referenced = row.json.refs.flatMap((ref) => {
          const depth = this.depthOf.get(ref)
          return (
            (depth === undefined ? undefined : this.path[depth]?.post) ??
            inPage.get(ref) ??
            found.get(ref) ??
            []
          )
        })
      while (this.path.length > row.depth) {
        const left = this.path.pop()
        if (left) this.depthOf.delete(left.id)
      }
      while (this.path.length < row.depth) this.path.push(undefined)
      this.path.push(row.json && { id: row.id, post: row.json.post })
      if (row.json) this.depthOf.set(row.id, row.depth)
    }
  }
}

export const CONVERSATION_EXPORT = {
  method: 'GET',
  url: '/2/conversations/:conversation_id/export',
  name: 'conversation-export',
  group: 'search',
  params: CONVERSATION_EXPORT_PARAMS,
  summary: 'A conversation as a file: jsonl, csv or graphml',
} as const satisfies Endpoint<typeof CONVERSATION_EXPORT_PARAMS>

/**
 * `GET /2/conversations/:conversation_id/export?format=jsonl|csv|graphml` (docs/api.md §5): the
 * file, streamed (a byte stream, so it pulls the next page only once the socket has taken the
 * last; in object mode it would buffer sixteen pages). A conversation with nothing stored is a 200 with only `errors`, as on the tree.
 */
export function registerConversationExport(
  app: FastifyInstance,
  ctx: ServerContext,
  readTree: (db: Db, conversationId: string) => Promise<ExportTree>,
): void {
  addRoute(app, ctx, CONVERSATION_EXPORT, async (c) => {
    const id = c.params.conversation_id
    const format = c.params.format ?? 'jsonl'
    const tree = await readTree(ctx.readDb, id)
    if (tree.size === 0) return { body: { errors: [notFound('tweet', 'conversation_id', id)] } }
    const file = exportConversation(ctx.readDb, tree, format)
    c.reply
      .type(file.contentType)
      .header('content-disposition', `attachment; filename="${file.filename}"`)
      .send(Readable.from(file.chunks, { objectMode: false }))
    return undefined
  })
}
