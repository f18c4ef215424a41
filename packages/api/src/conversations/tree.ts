import type { FastifyInstance } from 'fastify'
import { conversationVersion, postsByIds, wirePostsAtVersion } from '@threadline/db'
import {
  CONVERSATION_SORTS,
  isId,
  notFound,
  primaryFields,
  type ConversationTree,
  type ResourceNotFound,
} from '@threadline/domain'
import { renderPosts } from '../render.js'
import { FIELD_PARAMS } from '../specs.js'
import type { EndpointParams } from '../params.js'
import type { ServerContext } from '../types.js'
import { fieldSelection } from '../routes/fields.js'
import { addRoute, type Answer, type Endpoint } from '../routes/route.js'
import { invalidToken } from '../routes/window.js'
import type { TreeCache, TreeEntry } from './tree-cache.js'

export const CONVERSATION_TREE_PARAMS = {
  conversation_id: {
    kind: 'id',
    required: true,
    description: 'The id of the Post that started the conversation',
  },
  max_results: { kind: 'int', min: 1, max: 1000, description: 'Posts per page (default 100)' },
  pagination_token: { kind: 'string', description: 'meta.next_token of the previous page' },
  sort: {
    kind: 'enum',
    values: CONVERSATION_SORTS,
    description: 'Order of the replies to one Post (default oldest)',
  },
  ...FIELD_PARAMS,
} as const satisfies EndpointParams

export const CONVERSATION_TREE = {
  method: 'GET',
  url: '/2/conversations/:conversation_id',
  name: 'conversation-tree',
  group: 'lookup',
  params: CONVERSATION_TREE_PARAMS,
  summary: 'A conversation as a tree, in pre-order pages',
} as const satisfies Endpoint<typeof CONVERSATION_TREE_PARAMS>

const DEFAULT_PAGE = 100

/** A page's errors: each missing parent of its orphans once, and the root on the first page. */
function pageErrors(tree: ConversationTree, start: number, end: number): ResourceNotFound[] {
  const named = new Set<string>()
  const errors: ResourceNotFound[] = []
  if (!tree.rootStored && start === 0) {
    named.add(tree.conversationId)
    errors.push(notFound('tweet', 'conversation_id', tree.conversationId))
  }
  for (let p = start; p < end; p++) {
    const parent = tree.missingParentAt(p)
    if (parent === undefined || named.has(parent)) continue
    named.add(parent)
    errors.push(notFound('tweet', 'parent_id', parent))
  }
  return errors
}

/** `fresh`, with the Posts of `ids` it lacks taken from `kept`. */
function withKept(
  ids: readonly string[],
  fresh: Map<string, string>,
  kept: ReadonlyMap<string, string>,
): Map<string, string> {
  for (const id of ids) {
    if (fresh.has(id)) continue
    const json = kept.get(id)
    if (json !== undefined) fresh.set(id, json)
  }
  return fresh
}

interface Page {
  start: number
  end: number
  ids: string[]
}

/** The page after the Post `after` (the start without one); undefined when `after` is not in it. */
function cut(tree: ConversationTree, after: string | undefined, limit: number): Page | undefined {
  let start = 0
  if (after !== undefined) {
    // The position is the last Post sent: the page goes on after it in today's tree.
    const position = tree.positionOf(after)
    if (position === undefined) return undefined
    start = position + 1
  }
  const end = Math.min(start + limit, tree.size)
  const ids: string[] = []
  for (let p = start; p < end; p++) ids.push(tree.idAt(p))
  return { start, end, ids }
}

function pageMeta(
  id: string,
  tree: ConversationTree,
  entry: TreeEntry,
  page: Page,
  nextToken: (last: string) => string,
): Record<string, unknown> {
  return {
    conversation_id: id,
    result_count: page.ids.length,
    ...(page.end < tree.size ? { next_token: nextToken(page.ids[page.ids.length - 1]!) } : {}),
    post_count: tree.meta.post_count,
    reply_count: tree.meta.reply_count,
    ...(entry.reportedReplyCount !== undefined
      ? { reported_reply_count: entry.reportedReplyCount }
      : {}),
    missing_count: tree.meta.missing_count,
    max_depth: tree.meta.max_depth,
    participant_count: tree.meta.participant_count,
    first_created_at: tree.meta.first_created_at,
    last_created_at: tree.meta.last_created_at,
  }
}

/** A page from Posts already in wire form (JSON text), `thread` spliced into each. */
function wireAnswer(
  tree: ConversationTree,
  page: Page,
  posts: ReadonlyMap<string, string>,
  meta: Record<string, unknown>,
): Answer {
  const data: string[] = []
  for (let p = page.start; p < page.end; p++) {
    const post = posts.get(tree.idAt(p))
    if (post === undefined) continue
    data.push(`${post.slice(0, -1)},"thread":${JSON.stringify(tree.threadAt(p))}}`)
  }
  const errors = pageErrors(tree, page.start, page.end)
  const members = [
    data.length > 0 ? `"data":[${data.join(',')}]` : undefined,
    errors.length > 0 ? `"errors":${JSON.stringify(errors)}` : undefined,
    `"meta":${JSON.stringify(meta)}`,
  ]
  return { json: `{${members.filter((m) => m !== undefined).join(',')}}` }
}

/** `GET /2/conversations/:conversation_id`: the tree, in pre-order pages (docs/api.md §5). */
export function registerConversationTree(
  app: FastifyInstance,
  ctx: ServerContext,
  trees: TreeCache,
): void {
  const { readDb, pageTokens } = ctx
  addRoute(app, ctx, CONVERSATION_TREE, async (c) => {
    const id = c.params.conversation_id
    const sort = c.params.sort ?? 'oldest'
    const limit = c.params.max_results ?? DEFAULT_PAGE
    // Bound to the app, the conversation and the sort; not to the page size or the fields.
    const scope = `conversation\n${c.client.app_id}\n${id}\n${sort}`
    const nextToken = (last: string) => pageTokens.encode(scope, last)
    const token = c.params.pagination_token
    let after: string | undefined
    if (token !== undefined) {
      after = pageTokens.decode(scope, token)
      if (after === undefined || !isId(after)) throw invalidToken('pagination_token', token)
    }
    const unknown: Answer = { body: { errors: [notFound('tweet', 'conversation_id', id)] } }
    const sel = fieldSelection(c.params)

    if (sel.expansions.size === 0) {
      // No includes: Posts come from Postgres as wire JSON text, and are kept with the tree they
      // were read at. A held tree is checked against the store's version on every request: in
      // the statement that reads the page's Posts not kept, or alone when all are.
      const fields = [...primaryFields(sel)]
      const fieldsKey = fields.join(',')
      const held = trees.peek(id)
      const heldTree = held?.tree(sort)
      const heldPage = heldTree && cut(heldTree, after, limit)
      let seen: { version: string; posts: Map<string, string> } | undefined
      if (held && heldTree && heldPage && heldPage.ids.length > 0) {
        // Posts kept from earlier pages at this version are not read again: only the version is.
        const kept = held.wirePosts(fieldsKey)
        const missing = heldPage.ids.filter((postId) => !kept.has(postId))
        seen =
          missing.length === 0
            ? { version: await conversationVersion(readDb, id), posts: new Map() }
            : await wirePostsAtVersion(readDb, id, missing, fields)
        if (seen.version === held.version) {
          const posts = withKept(heldPage.ids, seen.posts, kept)
          held.keep(fieldsKey, posts)
          const meta = pageMeta(id, heldTree, held, heldPage, nextToken)
          return wireAnswer(heldTree, heldPage, posts, meta)
        }
      }
      // Brought up to date, or read with the Posts themselves when the whole tree fits in the page.
      const { entry, posts } = await trees.refresh(
        readDb,
        id,
        { fields, upTo: limit },
        seen?.version,
      )
      const tree = entry.tree(sort)
      if (tree.size === 0) return unknown
      const page = cut(tree, after, limit)
      if (!page) throw invalidToken('pagination_token', token!)
      // Posts read above at the version the tree is now at are current, as are those it kept
      // across the change: only the others are read.
      const current = seen?.version === entry.version ? seen.posts : undefined
      const wire = withKept(page.ids, posts ?? current ?? new Map(), entry.wirePosts(fieldsKey))
      entry.keep(fieldsKey, wire)
      const missing = page.ids.filter((postId) => !wire.has(postId))
      if (missing.length > 0) {
        const read = await wirePostsAtVersion(readDb, id, missing, fields)
        for (const [postId, json] of read.posts) wire.set(postId, json)
        if (read.version === entry.version) entry.keep(fieldsKey, read.posts)
      }
      return wireAnswer(tree, page, wire, pageMeta(id, tree, entry, page, nextToken))
    }

    const entry = await trees.get(readDb, id)
    const tree = entry.tree(sort)
    if (tree.size === 0) return unknown
    const page = cut(tree, after, limit)
    if (!page) throw invalidToken('pagination_token', token!)
    const rows = await postsByIds(readDb, page.ids)
    const byId = new Map(rows.map((r) => [r.id, r]))
    const ordered = page.ids.flatMap((postId) => byId.get(postId) ?? [])
    const rendered = await renderPosts(readDb, ordered, sel)
    const threads = new Map(page.ids.map((postId, i) => [postId, tree.threadAt(page.start + i)]))
    const data = rendered.data.map((post) => ({ ...post, thread: threads.get(post.id) }))
    const errors = [...pageErrors(tree, page.start, page.end), ...rendered.errors]
    return {
      body: {
        ...(data.length > 0 ? { data } : {}),
        ...(rendered.includes ? { includes: rendered.includes } : {}),
        ...(errors.length > 0 ? { errors } : {}),
        meta: pageMeta(id, tree, entry, page, nextToken),
      },
    }
  })
}
