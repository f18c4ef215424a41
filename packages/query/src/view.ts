import { searchTerms, type Includes, type WirePost, type WireUser } from '@threadline/domain'

/**
 * What the matcher reads from one Post, computed once per Post however many rules test it.
 * Field meanings mirror the stored columns (see sql.ts), so both sides see the same values.
 */
export interface PostView {
  post: WirePost
  terms: Set<string>
  /** `' ' + searchTerms.join(' ') + ' '`: phrases are a substring test here, LIKE in SQL. */
  readonly joined: string
  authorId: string | undefined
  replyToUserId: string | undefined
  conversationId: string | undefined
  /** The first `replied_to` reference, as the writer's `in_reply_to_post_id`. */
  inReplyTo: string | undefined
  refs: Array<{ type: string; id: string }>
  /** Lower-cased usernames of the author and of the replied-to user, when known. */
  authorUsername: string | undefined
  replyToUsername: string | undefined
}

/** Ids as Postgres's bigint would print them (no leading zeros). */
function canon(id: unknown): string | undefined {
  if (typeof id !== 'string' || !/^[0-9]{1,19}$/.test(id)) return undefined
  return id.length > 1 && id[0] === '0' ? BigInt(id).toString() : id
}

/**
 * The username of user `id`: from `includes.users` (X's expansions), else from an inlined user
 * object on the Post (twarc2's flattened `author` / `in_reply_to_user`, or the stored stream's
 * `author`) when its id is that id.
 */
function usernameOf(
  id: string | undefined,
  includes: Includes | undefined,
  inline: unknown,
): string | undefined {
  if (id === undefined) return undefined
  const users = Array.isArray(includes?.users) ? includes.users : []
  for (const u of users as WireUser[]) {
    if (u && canon(u.id) === id && typeof u.username === 'string') return u.username.toLowerCase()
  }
  const o = inline as Partial<WireUser> | undefined
  if (o && typeof o === 'object' && canon(o.id) === id && typeof o.username === 'string') {
    return o.username.toLowerCase()
  }
  return undefined
}

export function viewOf(post: WirePost, includes?: Includes, author?: WireUser): PostView {
  const terms = searchTerms(post)
  let joined: string | undefined
  const refs: Array<{ type: string; id: string }> = []
  if (Array.isArray(post.referenced_tweets)) {
    for (const r of post.referenced_tweets) {
      const id = canon(r?.id)
      if (id !== undefined && typeof r.type === 'string') refs.push({ type: r.type, id })
    }
  }
  const authorId = canon(post.author_id)
  const replyToUserId = canon(post.in_reply_to_user_id)
  return {
    post,
    terms: new Set(terms),
    get joined() {
      joined ??= ` ${terms.join(' ')} `
      return joined
    },
    authorId,
    replyToUserId,
    conversationId: canon(post.conversation_id),
    inReplyTo: refs.find((r) => r.type === 'replied_to')?.id,
    refs,
    authorUsername: usernameOf(authorId, includes, author ?? post.author),
    replyToUsername: usernameOf(replyToUserId, includes, post.in_reply_to_user),
  }
}
