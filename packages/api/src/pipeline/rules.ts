import type { LoadedTargets, StoredPost, Withdrawal } from '@threadline/domain'
import type { HydratedPost, Hydration } from './hydrate.js'

/**
 * Where the Posts are served, which decides what a withdrawn one becomes: `lookup` names it in
 * `errors` as not found, `tree` keeps a placeholder for its replies to hang from, `list`
 * (search, streams, timelines) leaves it out.
 */
export type Surface = 'lookup' | 'tree' | 'list'

/** What is served of a hydration: Posts to present, placeholders, and the ids to name as not found. */
export interface Ruled {
  shown: Array<HydratedPost | { id: string; placeholder: Withdrawal }>
  /** Skeleton ids named as not found (lookup only): those not stored, then those withdrawn. */
  unknown: string[]
  targets?: LoadedTargets
}

/**
 * The rules step, applied to what was hydrated. Today it only sorts withdrawn Posts by surface;
 * it is the one place where what may be served is decided, so presentation stays mechanical.
 */
export function applyRules(h: Hydration, surface: Surface): Ruled {
  const shown: Ruled['shown'] = []
  const withdrawn: string[] = []
  for (const post of h.posts) {
    const state = post.withdrawn ?? post.post?.withdrawn
    if (state === undefined) shown.push(post)
    else if (surface === 'tree') shown.push({ id: post.id, placeholder: state })
    else withdrawn.push(post.id)
  }
  const unknown = surface === 'lookup' ? [...h.missing, ...withdrawn] : []
  return { shown, unknown, targets: h.targets && withoutWithdrawn(h.targets) }
}

/** Withdrawn Posts are not included: an expansion pointing at one finds nothing, as for a lookup. */
function withoutWithdrawn(targets: LoadedTargets): LoadedTargets {
  let posts: Map<string, StoredPost> | undefined
  for (const [id, post] of targets.posts) {
    if (post.withdrawn === undefined) continue
    posts ??= new Map(targets.posts)
    posts.delete(id)
  }
  return posts ? { ...targets, posts } : targets
}
