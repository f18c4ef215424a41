import type { Db } from '@threadline/db'
import type {
  FieldSelection,
  Includes,
  ResourceNotFound,
  StoredPost,
  WirePost,
} from '@threadline/domain'
import { renderHeld } from './pipeline/index.js'

export interface RenderedPage {
  data: WirePost[]
  includes?: Includes
  errors: ResourceNotFound[]
}

/**
 * @deprecated Posts read already, through the read pipeline, as objects: only for the tree
 * (`conversations/tree.ts`) until it calls `readPosts(db, ids, sel, { thread })`; then delete.
 */
export async function renderPosts(
  db: Db,
  posts: readonly StoredPost[],
  sel: FieldSelection,
): Promise<RenderedPage> {
  const page = await renderHeld(db, posts, sel)
  return { ...page, data: page.data.map((json) => JSON.parse(json) as WirePost) }
}
