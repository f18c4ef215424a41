import type { FastifyInstance } from 'fastify'
import {
  CONVERSATION_SORTS,
  isId,
  notFound,
  type ConversationTree,
  type ResourceNotFound,
} from '@threadline/domain'
import { pageJson, readPosts } from '../pipeline/index.js'
import { FIELD_PARAMS } from '../specs.js'
import type { EndpointParams } from '../params.js'
import type { ServerContext } from '../types.js'
import { fieldSelection } from '../routes/fields.js'
import { addRoute, type Endpoint } from '../routes/route.js'
import { invalidToken } from '../routes/window.js'
import type { HeldTree, TreeCache } from './tree-cache.js'

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
  held: HeldTree,
  page: Page,
  nextToken: (last: string) => string,
): Record<string, unknown> {
  return {
    conversation_id: id,
    result_count: page.ids.length,
    ...(page.end < tree.size ? { next_token: nextToken(page.ids[page.ids.length - 1]!) } : {}),
    post_count: tree.meta.post_count,
    reply_count: tree.meta.reply_count,
    ...(held.reportedReplyCount !== undefined
      ? { reported_reply_count: held.reportedReplyCount }
      : {}),
    missing_count: tree.meta.missing_count,
    max_depth: tree.meta.max_depth,
    participant_count: tree.meta.participant_count,
    first_created_at: tree.meta.first_created_at,
    last_created_at: tree.meta.last_created_at,
  }
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
    const token = c.params.pagination_token
    let after: string | undefined
    if (token !== undefined) {
      after = pageTokens.decode(scope, token)
      if (after === undefined || !isId(after)) throw invalidToken('pagination_token', token)
    }

    let held = await trees.get(readDb, id, sort)
    let page = cut(held.tree(sort), after, limit)
    // The token's Post is newer than the tree held (another instance served it): read it now.
    if (!page && held.size > 0) {
      held = await trees.read(readDb, id)
      page = cut(held.tree(sort), after, limit)
    }
    const tree = held.tree(sort)
    if (tree.size === 0) return { body: { errors: [notFound('tweet', 'conversation_id', id)] } }
    if (!page) throw invalidToken('pagination_token', token!)
    const threads = new Map(page.ids.map((postId, i) => [postId, tree.threadAt(page.start + i)]))
    const posts = await readPosts(readDb, page.ids, fieldSelection(c.params), {
      thread: (postId) => threads.get(postId)!,
    })
    const nextToken = (last: string) => pageTokens.encode(scope, last)
    return {
      json: pageJson(
        { ...posts, errors: [...pageErrors(tree, page.start, page.end), ...posts.errors] },
        { meta: pageMeta(id, tree, held, page, nextToken) },
      ),
    }
  })
}
