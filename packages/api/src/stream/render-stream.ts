import {
  assembleIncludes,
  firstTargets,
  formatPostTime,
  isId,
  primaryFields,
  secondTargets,
  shapePost,
  snowflakeTime,
  type FieldSelection,
  type Includes,
  type ResourceNotFound,
  type StoredPost,
  type StoredUser,
  type WirePost,
  type WireUser,
} from '@threadline/domain'
import { postsByIds, usersByIds, usersByUsernames, type Db } from '@threadline/db'

/** A Post read from the `stored` stream: the stored object and its author (when stored). */
export interface StreamPost {
  /** The Redis Stream entry id (`<ms>-<seq>`): the stream's order. */
  streamId: string
  post: StoredPost
  /** The upstream object as stored: what rules match against. */
  wire: WirePost
  author?: StoredUser
  authorWire?: WireUser
}

const idOrNull = (v: unknown): string | null => (isId(v) ? v : null)

/**
 * Reads one `stored` entry body (`{data, author}`). Undefined when it is not a Post we can shape,
 * so one odd entry never stops a stream.
 */
export function parseStreamPost(
  streamId: string,
  id: string,
  body: string,
): StreamPost | undefined {
  let parsed: { data?: unknown; author?: unknown }
  try {
    parsed = JSON.parse(body) as typeof parsed
  } catch {
    return undefined
  }
  const raw = parsed?.data as WirePost | undefined
  if (!raw || typeof raw !== 'object' || typeof raw.text !== 'string' || !isId(id)) return undefined
  const created =
    typeof raw.created_at === 'string' && !Number.isNaN(Date.parse(raw.created_at))
      ? formatPostTime(new Date(raw.created_at))
      : (snowflakeTime(id) ?? new Date(0)).toISOString()
  const post: StoredPost = {
    id,
    text: raw.text,
    created_at: created,
    conversation_id: idOrNull(raw.conversation_id),
    author_id: idOrNull(raw.author_id),
    in_reply_to_user_id: idOrNull(raw.in_reply_to_user_id),
    raw,
  }
  const a = parsed.author as WireUser | undefined
  const author =
    a && typeof a === 'object' && isId(a.id) && typeof a.username === 'string'
      ? {
          id: a.id,
          name: typeof a.name === 'string' ? a.name : a.username,
          username: a.username,
          raw: a,
        }
      : undefined
  return { streamId, post, wire: raw, author, authorWire: author ? a : undefined }
}

export interface RenderedMessage {
  data: WirePost
  includes?: Includes
  errors?: ResourceNotFound[]
}

/**
 * Shapes each Post for one field selection, with its own `includes`. Authors come from the stream
 * entries; anything else the expansions point at is loaded in at most three batched queries for
 * the whole list (plus one for the authors of referenced Posts), never one per Post.
 */
export async function renderStreamPosts(
  db: Db,
  items: readonly StreamPost[],
  sel: FieldSelection,
): Promise<RenderedMessage[]> {
  const fields = primaryFields(sel)
  const posts = items.map((i) => i.post)
  if (sel.expansions.size === 0) return posts.map((p) => ({ data: shapePost(p, fields) }))

  const users = new Map<string, StoredUser>()
  for (const i of items) if (i.author) users.set(i.author.id, i.author)
  const first = firstTargets(posts, sel)
  const userIds = first.userIds.filter((id) => !users.has(id))
  const [refPosts, loadedUsers, named] = await Promise.all([
    postsByIds(db, first.tweetIds),
    usersByIds(db, userIds),
    usersByUsernames(db, first.usernames),
  ])
  for (const u of loadedUsers) users.set(u.id, u)
  for (const u of named) users.set(u.id, u)
  const postMap = new Map<string, StoredPost>(refPosts.map((p) => [p.id, p]))
  const more = secondTargets([...postMap.values()], sel, new Set(users.keys()))
  if (more.length > 0) for (const u of await usersByIds(db, more)) users.set(u.id, u)
  const usersByName = new Map<string, StoredUser>()
  for (const u of users.values()) usersByName.set(u.username.toLowerCase(), u)

  return posts.map((p) => {
    const { includes, errors } = assembleIncludes([p], sel, {
      posts: postMap,
      users,
      usersByName,
    })
    const out: RenderedMessage = { data: shapePost(p, fields) }
    if (includes && Object.keys(includes).length > 0) out.includes = includes
    if (errors.length > 0) out.errors = errors
    return out
  })
}
