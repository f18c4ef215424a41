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
  /** Skeleton ids named as not authorized (lookup only): hidden because the author is protected. */
  denied?: string[]
  targets?: LoadedTargets
}

/**
 * The rules step, applied to what was hydrated. Today it only sorts withdrawn Posts by surface;
 * it is the one place where what may be served is decided, so presentation stays mechanical.
 */
export function applyRules(h: Hydration, surface: Surface): Ruled {
  const shown: Ruled['shown'] = []
  const withdrawn: string[] = []
  const denied: string[] = []
  for (const post of h.posts) {
    const state = post.withdrawn ?? post.post?.withdrawn
    if (!state) shown.push(post)
    else if (surface === 'tree') shown.push({ id: post.id, placeholder: state })
    else if (isProtected(post)) denied.push(post.id)
    else withdrawn.push(post.id)
  }
  if (surface !== 'lookup')
    return { shown, unknown: [], targets: h.targets && withoutWithdrawn(h.targets) }
  return {
    shown,
    unknown: [...h.missing, ...withdrawn],
    ...(denied.length > 0 ? { denied } : {}),
    targets: h.targets && withoutWithdrawn(h.targets),
  }
}

/** Hidden because its author is protected: X answers "not authorized", not "not found". */
function isProtected(post: { withdrawn_reason?: string | null; post?: StoredPost }): boolean {
  return (post.withdrawn_reason ?? post.post?.withdrawn_reason) === 'protected'
}

/** Withdrawn Posts are not included: an expansion pointing at one finds nothing, as for a lookup. */
function withoutWithdrawn(targets: LoadedTargets): LoadedTargets {
  let posts: Map<string, StoredPost> | undefined
  const protectedPosts = new Set<string>()
  for (const [id, post] of targets.posts) {
    if (!post.withdrawn) continue
    posts ??= new Map(targets.posts)
    posts.delete(id)
    if (post.withdrawn_reason === 'protected') protectedPosts.add(id)
  }
  return posts ? { ...targets, posts, protectedPosts } : targets
}
