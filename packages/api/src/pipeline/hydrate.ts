import {
  postsByIds,
  searchPosts,
  searchWirePosts,
  usersByIds,
  usersByUsernames,
  wirePostsByIds,
  type Db,
  type PostCondition,
  type SearchWindow,
} from '@threadline/db'
import {
  firstTargets,
  primaryFields,
  secondTargets,
  type FieldSelection,
  type LoadedTargets,
  type StoredPost,
  type StoredUser,
  type Withdrawal,
} from '@threadline/domain'

/**
 * One Post of a skeleton as hydrated: the stored Post, to be shaped by `present`, or the Post
 * already in the selection's wire form (JSON text written by Postgres, see `readsText`), which
 * then says itself whether it was withdrawn.
 */
export type HydratedPost = { id: string; withdrawn?: Withdrawal; withdrawn_reason?: string } & (
  { post: StoredPost; json?: undefined } | { json: string; post?: undefined }
)

export interface Hydration {
  /** The skeleton's stored Posts, in skeleton order. */
  posts: HydratedPost[]
  /** Skeleton ids with no stored Post. */
  missing: string[]
  /** What the expansions point at; undefined when they could not be read (no includes then). */
  targets?: LoadedTargets
}

export type SearchPage = SearchWindow & { beforeId?: string; limit: number }

const NO_TARGETS: LoadedTargets = { posts: new Map(), users: new Map(), usersByName: new Map() }

/**
 * The one choice between the two ways of reading Posts. Without expansions nothing needs the Post
 * as an object, so Postgres writes the selection's JSON text itself: `bench api` shows lookups
 * ≥ 1.5× faster so (the text equals `JSON.stringify(shapePost(…))`, `wire-text.int.test.ts`).
 */
function readsText(sel: FieldSelection): boolean {
  return sel.expansions.size === 0
}

const wireFields = (sel: FieldSelection) => [...primaryFields(sel)]

/** The Posts of `ids` (skeleton order, duplicates once) and what their expansions point at. */
export async function hydrate(
  db: Db,
  ids: readonly string[],
  sel: FieldSelection,
): Promise<Hydration> {
  if (readsText(sel)) {
    const rows = await wirePostsByIds(db, ids, wireFields(sel))
    return inOrder(ids, rows, NO_TARGETS)
  }
  const stored = await postsByIds(db, ids)
  const byId = new Map(stored.map((p) => [p.id, p]))
  const posts = ids.flatMap((id) => byId.get(id) ?? [])
  return inOrder(
    ids,
    posts.map((post) => ({ id: post.id, post })),
    await hydrateTargets(db, posts, sel),
  )
}

/**
 * A page of a search: its skeleton (ids newest first, keyset-paged) and its hydration read in one
 * statement, since the page's query reads the Posts anyway.
 */
export async function hydrateSearch(
  db: Db,
  condition: PostCondition,
  window: SearchPage,
  sel: FieldSelection,
): Promise<Hydration & { more: boolean }> {
  if (readsText(sel)) {
    const { posts, more } = await searchWirePosts(db, condition, window, wireFields(sel))
    return { posts, missing: [], targets: NO_TARGETS, more }
  }
  const { posts, more } = await searchPosts(db, condition, window)
  return { ...(await hydrateHeld(db, posts, sel)), more }
}

/**
 * Posts read already (a stream batch), with the users known beside them (their authors): only
 * what the expansions point at is read.
 */
export async function hydrateHeld(
  db: Db,
  posts: readonly StoredPost[],
  sel: FieldSelection,
  knownUsers: readonly StoredUser[] = [],
): Promise<Hydration> {
  return {
    posts: posts.map((post) => ({ id: post.id, post })),
    missing: [],
    targets: await hydrateTargets(db, posts, sel, knownUsers),
  }
}

/** Held Posts without their expansions' targets, when those cannot be read. */
export function heldOnly(posts: readonly StoredPost[]): Hydration {
  return { posts: posts.map((post) => ({ id: post.id, post })), missing: [] }
}

function inOrder(ids: readonly string[], found: HydratedPost[], targets: LoadedTargets): Hydration {
  const byId = new Map(found.map((p) => [p.id, p]))
  const posts: HydratedPost[] = []
  const missing: string[] = []
  for (const id of new Set(ids)) {
    const post = byId.get(id)
    if (post) posts.push(post)
    else missing.push(id)
  }
  return { posts, missing, targets }
}

/**
 * What the expansions of `posts` point at, with batched reads: Posts, users by id and users by
 * name together, then the authors of the referenced Posts. Never one query per Post; none at all
 * when nothing is expanded.
 */
async function hydrateTargets(
  db: Db,
  posts: readonly StoredPost[],
  sel: FieldSelection,
  knownUsers: readonly StoredUser[] = [],
): Promise<LoadedTargets> {
  const first = firstTargets(posts, sel)
  const users = new Map<string, StoredUser>(knownUsers.map((u) => [u.id, u]))
  const held = new Map(posts.map((p) => [p.id, p]))
  const [refPosts, byId, named] = await Promise.all([
    postsByIds(
      db,
      first.tweetIds.filter((id) => !held.has(id)),
    ),
    usersByIds(
      db,
      first.userIds.filter((id) => !users.has(id)),
    ),
    usersByUsernames(db, first.usernames),
  ])
  const postMap = new Map<string, StoredPost>(refPosts.map((p) => [p.id, p]))
  for (const id of first.tweetIds) {
    const p = held.get(id)
    if (p) postMap.set(id, p)
  }
  for (const u of byId) users.set(u.id, u)
  for (const u of named) users.set(u.id, u)
  const more = secondTargets([...postMap.values()], sel, new Set(users.keys()))
  if (more.length > 0) for (const u of await usersByIds(db, more)) users.set(u.id, u)
  const usersByName = new Map<string, StoredUser>()
  for (const u of users.values()) usersByName.set(u.username.toLowerCase(), u)
  // A mention resolves to the user read by that name, whatever another read holds.
  for (const u of named) usersByName.set(u.username.toLowerCase(), u)
  return { posts: postMap, users, usersByName }
}
