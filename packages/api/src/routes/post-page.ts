import type { FastifyRequest } from 'fastify'
import type { PostPageWindow, ReadPost } from '@threadline/db'
import { isId } from '@threadline/domain'
import type { PageTokens } from '../page-token.js'
import type { Db } from '@threadline/db'
import { pageJson, readHeldPosts } from '../pipeline/index.js'
import { fieldSelection, type FieldParams } from './fields.js'
import type { Answer, Body } from './route.js'
import { invalidToken, timeWindow, tokenScope, type WindowParams } from './window.js'

/** The paging parameters of the archive's Post lists (timelines, mentions, quotes). */
export interface PostPageParams extends WindowParams, FieldParams {
  max_results?: number
  pagination_token?: string
  exclude?: readonly ('replies' | 'retweets')[]
}

/**
 * The window of one page: X's bounds, the page size, and the position in a `pagination_token`
 * bound to the endpoint, its subject (a user, a Post) and the bounds, so a token of another list
 * is refused (400).
 */
function pageWindow(
  request: FastifyRequest,
  tokens: PageTokens,
  list: string,
  p: PostPageParams,
  now: Date,
  defaultSize: number,
): { window: PostPageWindow; scope: string } {
  const w = timeWindow(request, p, now, false)
  const exclude = [...new Set(p.exclude ?? [])].sort()
  const scope = tokenScope(request, list, '', w, exclude.join(','))
  let beforeId: string | undefined
  let afterId: string | undefined
  const token = p.pagination_token
  if (token !== undefined) {
    // A position is the id a page ends at: `<id` toward older Posts, `>id` toward newer ones.
    const position = tokens.decode(scope, token) ?? ''
    const id = position.slice(1)
    if (!isId(id) || !'<>'.includes(position[0] ?? '-'))
      throw invalidToken('pagination_token', token)
    if (position[0] === '<') beforeId = id
    else afterId = id
  }
  return {
    scope,
    window: {
      ...w,
      beforeId,
      afterId,
      limit: p.max_results ?? defaultSize,
      excludeReplies: exclude.includes('replies'),
      excludeRetweets: exclude.includes('retweets'),
    },
  }
}

/**
 * A page answered as X does: the Posts its query read through the read pipeline, `meta` with
 * `result_count`, and `next_token` when older Posts follow; with `timeline`, also the newest and
 * oldest ids and `previous_token` when newer Posts precede (any page reached by a token).
 */
async function postPageAnswer(
  ctx: { readDb: Db; pageTokens: PageTokens },
  scope: string,
  p: FieldParams,
  window: PostPageWindow,
  page: { posts: ReadPost[]; more: boolean },
  timeline = true,
): Promise<Answer> {
  const { posts, more } = page
  if (posts.length === 0) return { body: { meta: { result_count: 0 } } }
  const rendered = await readHeldPosts(ctx.readDb, posts, fieldSelection(p))
  const newest = posts[0]!.id
  const oldest = posts[posts.length - 1]!.id
  const toNewer = window.afterId !== undefined
  const meta: Body = timeline
    ? { result_count: posts.length, newest_id: newest, oldest_id: oldest }
    : { result_count: posts.length }
  // Read toward newer Posts, `more` means newer ones remain, and the older page it came from is there.
  if (toNewer || more) meta.next_token = ctx.pageTokens.encode(scope, `<${oldest}`)
  if (timeline && (toNewer ? more : window.beforeId !== undefined)) {
    meta.previous_token = ctx.pageTokens.encode(scope, `>${newest}`)
  }
  return { json: pageJson(rendered, { meta }) }
}

/** A Post list: where its tokens are bound, its default page size, and its kind of `meta`. */
export interface PostList {
  /** The list's path below `/2/` with its subject, e.g. `users/12/tweets`. */
  path: string
  defaultSize: number
  /** False for X's short meta (result_count and next_token only). */
  timeline?: boolean
}

/** One page of a Post list: its window, the ids `readPage` reads in it, answered as X does. */
export async function postListAnswer(
  ctx: { readDb: Db; pageTokens: PageTokens },
  c: { request: FastifyRequest; params: PostPageParams; now: Date },
  list: PostList,
  readPage: (db: Db, window: PostPageWindow) => Promise<{ posts: ReadPost[]; more: boolean }>,
): Promise<Answer> {
  const { request, params } = c
  const { window, scope } = pageWindow(
    request,
    ctx.pageTokens,
    list.path,
    params,
    c.now,
    list.defaultSize,
  )
  const page = await readPage(ctx.readDb, window)
  return postPageAnswer(ctx, scope, params, window, page, list.timeline)
}
