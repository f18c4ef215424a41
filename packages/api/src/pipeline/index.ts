import type { Db, PostCondition } from '@threadline/db'
import type { FieldSelection, StoredPost, StoredUser } from '@threadline/domain'
import { heldOnly, hydrate, hydrateHeld, hydrateSearch, type SearchPage } from './hydrate.js'
import { present, presentEach, type PostsPage, type PresentOptions } from './present.js'
import { applyRules } from './rules.js'

export { countsJson, pageJson, streamLine, type PostsPage, type PresentOptions } from './present.js'
export type { HydratedPost, Hydration } from './hydrate.js'

/**
 * The read pipeline (docs/architecture.md §1, step 6): a skeleton (which ids: a lookup, a search
 * page, a tree page, a timeline) is hydrated in one batched read, passed through the rules, and
 * presented in X's shape. Every route and stream turns Posts into JSON through here.
 */
export async function readPosts(
  db: Db,
  ids: readonly string[],
  sel: FieldSelection,
  options: PresentOptions = {},
): Promise<PostsPage> {
  const surface = options.thread ? 'tree' : options.notFoundAs ? 'lookup' : 'list'
  return present(applyRules(await hydrate(db, ids, sel), surface), sel, options)
}

/**
 * A page whose query read its Posts already (a timeline, mentions, quotes): only what the
 * expansions point at is read; the page's order is kept.
 */
export async function readHeldPosts(
  db: Db,
  posts: readonly StoredPost[],
  sel: FieldSelection,
): Promise<PostsPage> {
  return present(applyRules(await hydrateHeld(db, posts, sel), 'list'), sel)
}

/** A page of a search: its ids (for the page's meta) and whether more follow, with the page. */
export async function readSearchPage(
  db: Db,
  condition: PostCondition,
  window: SearchPage,
  sel: FieldSelection,
): Promise<PostsPage & { ids: string[]; more: boolean }> {
  const hydrated = await hydrateSearch(db, condition, window, sel)
  const page = present(applyRules(hydrated, 'list'), sel)
  return { ...page, ids: hydrated.posts.map((p) => p.id), more: hydrated.more }
}

/**
 * A stream batch's messages by Post id, each Post with its own includes. The batch's Posts and
 * their authors come with it; when what else the expansions point at cannot be read, the Posts
 * go alone rather than not at all.
 */
export async function readStreamMessages(
  db: Db,
  posts: readonly StoredPost[],
  authors: readonly StoredUser[],
  sel: FieldSelection,
  onHydrateError: (err: unknown) => void,
): Promise<Map<string, string>> {
  const hydrated = await hydrateHeld(db, posts, sel, authors).catch((err: unknown) => {
    onHydrateError(err)
    return heldOnly(posts)
  })
  return presentEach(applyRules(hydrated, 'list'), sel)
}
