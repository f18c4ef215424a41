import {
  assembleIncludes,
  firstTargets,
  primaryFields,
  secondTargets,
  shapePost,
  type FieldSelection,
  type Includes,
  type ResourceNotFound,
  type StoredPost,
  type StoredUser,
  type WirePost,
} from '@threadline/domain'
import { postsByIds, usersByIds, usersByUsernames, type Db } from '@threadline/db'

export interface RenderedPage {
  data: WirePost[]
  includes?: Includes
  errors: ResourceNotFound[]
}

const byId = <T extends { id: string }>(rows: readonly T[]) => new Map(rows.map((r) => [r.id, r]))

/**
 * Shapes a page of Posts and resolves its expansions with batched lookups: at most one query for
 * the referenced Posts and users together, and one more for the authors of referenced Posts. Never
 * one query per Post.
 */
export async function renderPosts(
  db: Db,
  posts: readonly StoredPost[],
  sel: FieldSelection,
): Promise<RenderedPage> {
  const fields = primaryFields(sel)
  const data = posts.map((p) => shapePost(p, fields))
  if (sel.expansions.size === 0 || posts.length === 0) return { data, errors: [] }

  const primary = byId(posts)
  const first = firstTargets(posts, sel)
  const missingPosts = first.tweetIds.filter((id) => !primary.has(id))
  const [refPosts, users, named] = await Promise.all([
    postsByIds(db, missingPosts),
    usersByIds(db, first.userIds),
    usersByUsernames(db, first.usernames),
  ])
  const postMap = new Map<string, StoredPost>(byId(refPosts))
  for (const id of first.tweetIds) {
    const p = primary.get(id)
    if (p) postMap.set(id, p)
  }
  const userMap = new Map<string, StoredUser>(byId(users))
  for (const u of named) userMap.set(u.id, u)
  const more = secondTargets([...postMap.values()], sel, new Set(userMap.keys()))
  if (more.length > 0) for (const u of await usersByIds(db, more)) userMap.set(u.id, u)

  const { includes, errors } = assembleIncludes(posts, sel, {
    posts: postMap,
    users: userMap,
    usersByName: new Map(named.map((u) => [u.username.toLowerCase(), u])),
  })
  return { data, includes, errors }
}
