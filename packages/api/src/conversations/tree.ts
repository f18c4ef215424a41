import type { FastifyInstance } from 'fastify'
import { postsByIds, wirePostsByIds } from '@threadline/db'
import {
  CONVERSATION_SORTS,
  isId,
  notFound,
  primaryFields,
  type ConversationSort,
  type ConversationTree,
  type ResourceNotFound,
} from '@threadline/domain'
import { renderPosts } from '../render.js'
import { FIELD_PARAMS } from '../specs.js'
import type { EndpointParams } from '../params.js'
import type { ServerContext } from '../types.js'
import { fieldSelection, getRoute, invalidToken } from './route.js'
import type { TreeCache } from './tree-cache.js'

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

/** `GET /2/conversations/:conversation_id`: the tree, in pre-order pages (docs/api.md §5). */
export function registerConversationTree(
  app: FastifyInstance,
  ctx: ServerContext,
  trees: TreeCache,
): void {
  const { readDb, pageTokens } = ctx
  getRoute(
    app,
    ctx.now,
    '/2/conversations/:conversation_id',
    {
      name: 'conversation-tree',
      group: 'lookup',
      params: CONVERSATION_TREE_PARAMS,
      summary: 'A conversation as a tree, in pre-order pages',
    },
    async (c) => {
      const id = c.params.conversation_id as string
      const sort = (c.params.sort as ConversationSort | undefined) ?? 'oldest'
      const limit = (c.params.max_results as number | undefined) ?? DEFAULT_PAGE
      // Bound to the app, the conversation and the sort; not to the page size or the fields.
      const scope = `conversation\n${c.client.app_id}\n${id}\n${sort}`
      const token = c.params.pagination_token as string | undefined
      let after: string | undefined
      if (token !== undefined) {
        after = pageTokens.decode(scope, token)
        if (after === undefined || !isId(after)) throw invalidToken(token)
      }

      const { tree, reportedReplyCount } = await trees.get(readDb, id, sort)
      if (tree.size === 0) return { body: { errors: [notFound('tweet', 'conversation_id', id)] } }
      let start = 0
      if (after !== undefined) {
        // The position is the last Post sent: the page goes on after it in today's tree.
        const position = tree.positionOf(after)
        if (position === undefined) throw invalidToken(token!)
        start = position + 1
      }
      const end = Math.min(start + limit, tree.size)
      const ids: string[] = []
      for (let p = start; p < end; p++) ids.push(tree.idAt(p))

      const meta: Record<string, unknown> = {
        conversation_id: id,
        result_count: ids.length,
        ...(end < tree.size ? { next_token: pageTokens.encode(scope, ids[ids.length - 1]!) } : {}),
        post_count: tree.meta.post_count,
        reply_count: tree.meta.reply_count,
        ...(reportedReplyCount !== undefined ? { reported_reply_count: reportedReplyCount } : {}),
        missing_count: tree.meta.missing_count,
        max_depth: tree.meta.max_depth,
        participant_count: tree.meta.participant_count,
        first_created_at: tree.meta.first_created_at,
        last_created_at: tree.meta.last_created_at,
      }
      const errors = pageErrors(tree, start, end)
      const sel = fieldSelection(c.params)

      if (sel.expansions.size === 0) {
        // No includes: the Posts come from Postgres as wire JSON text; `thread` is spliced in.
        const rows = await wirePostsByIds(readDb, ids, [...primaryFields(sel)])
        const json = new Map(rows.map((r) => [r.id, r.json]))
        const data: string[] = []
        for (let p = start; p < end; p++) {
          const post = json.get(tree.idAt(p))
          if (post === undefined) continue
          data.push(`${post.slice(0, -1)},"thread":${JSON.stringify(tree.threadAt(p))}}`)
        }
        const members = [
          data.length > 0 ? `"data":[${data.join(',')}]` : undefined,
          errors.length > 0 ? `"errors":${JSON.stringify(errors)}` : undefined,
          `"meta":${JSON.stringify(meta)}`,
        ]
        return { json: `{${members.filter((m) => m !== undefined).join(',')}}` }
      }

      const rows = await postsByIds(readDb, ids)
      const byId = new Map(rows.map((r) => [r.id, r]))
      const ordered = ids.flatMap((postId) => byId.get(postId) ?? [])
      const page = await renderPosts(readDb, ordered, sel)
      const threads = new Map(ids.map((postId, i) => [postId, tree.threadAt(start + i)]))
      const data = page.data.map((post) => ({ ...post, thread: threads.get(post.id) }))
      const allErrors = [...errors, ...page.errors]
      return {
        body: {
          ...(data.length > 0 ? { data } : {}),
          ...(page.includes ? { includes: page.includes } : {}),
          ...(allErrors.length > 0 ? { errors: allErrors } : {}),
          meta,
        },
      }
    },
  )
}
