import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import type { Db } from '@threadline/db'
import {
  EXPORT_CONTENT_TYPES,
  formatExport,
  formatPostTime,
  notFound,
  TWEET_FIELDS,
  USER_FIELDS,
  type ExportFormat,
  type ExportRow,
  type FieldSelection,
  type LoadedTargets,
  type StoredPost,
  type ThreadMember,
  type Withdrawal,
} from '@threadline/domain'
import { hydrate } from '../pipeline/hydrate.js'
import { presentEach } from '../pipeline/present.js'
import { applyRules } from '../pipeline/rules.js'
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

/**
 * What an export reads of a Post through the read pipeline: every field X has and its author; a
 * jsonl line (the Post's filtered-stream message) also includes the Posts it references.
 */
const EXPORT_SELECTION: FieldSelection = {
  tweetFields: new Set(TWEET_FIELDS),
  userFields: new Set(USER_FIELDS),
  expansions: new Set(['author_id']),
}
const JSONL_SELECTION: FieldSelection = {
  ...EXPORT_SELECTION,
  expansions: new Set(['author_id', 'referenced_tweets.id']),
}

/** What an export needs of a conversation's tree (pre-order positions, `sort=oldest`). */
export interface ExportTree {
  conversationId: string
  size: number
  idAt(position: number): string
  threadAt(position: number): ThreadMember
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
  const read = (from: number): Promise<ExportRow[]> => {
    const places = new Map<string, ThreadMember>()
    for (let p = from; p < Math.min(from + EXPORT_PAGE, tree.size); p++) {
      places.set(tree.idAt(p), tree.threadAt(p))
    }
    const rows = readExportPage(db, places, format === 'jsonl')
    // A read started ahead must not reject unobserved if the consumer stops first.
    rows.catch(() => undefined)
    return rows
  }
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
 * One page of the tree as export rows, in its order, through the read pipeline: hydrated, then
 * ruled as a tree is (a Post X withdrew keeps its place without its content, docs/api.md §7), and
 * with `lines` presented as filtered-stream messages. A Post deleted since the tree was read is
 * left out.
 */
async function readExportPage(
  db: Db,
  places: ReadonlyMap<string, ThreadMember>,
  lines: boolean,
): Promise<ExportRow[]> {
  const sel = lines ? JSONL_SELECTION : EXPORT_SELECTION
  const hydrated = await hydrate(db, [...places.keys()], sel)
  const stored = new Map(hydrated.posts.map((p) => [p.id, p.post!]))
  const ruled = applyRules(hydrated, 'tree')
  const messages = lines ? presentEach(ruled, sel) : undefined
  return ruled.shown.map((item) => {
    const place = places.get(item.id)!
    const post = stored.get(item.id)!
    if ('placeholder' in item) return withdrawnRow(post, place, item.placeholder)
    const row = exportRow(post, place, ruled.targets)
    const line = messages?.get(item.id)
    if (line !== undefined) row.line = line
    return row
  })
}

/** A Post's place in the tree, as every row carries it. */
function placeOf(id: string, place: ThreadMember) {
  return {
    id,
    depth: place.depth,
    stored_reply_count: place.reply_count,
    descendant_count: place.descendant_count,
    ...(place.parent_id !== undefined ? { parent_id: place.parent_id } : {}),
    ...(place.missing_parent ? { missing_parent: true } : {}),
  }
}

/** A stored Post's row: its columns from the hydrated Post and its author. */
function exportRow(post: StoredPost, place: ThreadMember, targets?: LoadedTargets): ExportRow {
  const metrics = post.raw.public_metrics
  const author = post.author_id === null ? undefined : targets?.users.get(post.author_id)
  return {
    ...placeOf(post.id, place),
    conversation_id: post.conversation_id,
    author_id: post.author_id,
    author_username: author?.username ?? null,
    created_at: formatPostTime(new Date(post.created_at)),
    text: post.text,
    lang: post.raw.lang ?? null,
    reply_count: metrics?.reply_count ?? null,
    like_count: metrics?.like_count ?? null,
    retweet_count: metrics?.retweet_count ?? null,
    quote_count: metrics?.quote_count ?? null,
    quoted_id: post.raw.referenced_tweets?.find((r) => r.type === 'quoted')?.id ?? null,
  }
}

/** What a Post X withdrew shows of its own: its id, conversation, time and place, no content. */
function withdrawnRow(post: StoredPost, place: ThreadMember, withdrawn: Withdrawal): ExportRow {
  return {
    ...placeOf(post.id, place),
    conversation_id: post.conversation_id,
    author_id: null,
    author_username: null,
    created_at: formatPostTime(new Date(post.created_at)),
    text: '',
    lang: null,
    reply_count: null,
    like_count: null,
    retweet_count: null,
    quote_count: null,
    quoted_id: null,
    withdrawn,
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
