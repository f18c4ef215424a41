import { searchTerms, type Includes, type WirePost, type WireUser } from '@threadline/domain'

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
  const users = includes && Array.isArray(includes.users) ? includes.users : undefined
  if (users) {
    for (const u of users as WireUser[]) {
      if (u && canon(u.id) === id && typeof u.username === 'string') return u.username.toLowerCase()
    }
  }
  const o = inline as Partial<WireUser> | undefined
  if (o && typeof o === 'object' && canon(o.id) === id && typeof o.username === 'string') {
    return o.username.toLowerCase()
  }
  return undefined
}

/**
 * What the matcher reads from one Post, computed once per Post however many rules test it.
 * Field meanings mirror the stored columns (see sql.ts), so both sides see the same values.
 */
export class PostView {
  readonly terms: Set<string>
  readonly authorId: string | undefined
  readonly replyToUserId: string | undefined
  readonly conversationId: string | undefined
  /** The first `replied_to` reference, as the writer's `in_reply_to_post_id`. */
  readonly inReplyTo: string | undefined
  readonly refs: Array<{ type: string; id: string }> = []
  /** Lower-cased usernames of the author and of the replied-to user, when known. */
  readonly authorUsername: string | undefined
  readonly replyToUsername: string | undefined
  private readonly list: string[]
  private joinedText: string | undefined

  constructor(
    readonly post: WirePost,
    includes?: Includes,
    author?: WireUser,
  ) {
    this.list = searchTerms(post)
    this.terms = new Set(this.list)
    let inReplyTo: string | undefined
    if (Array.isArray(post.referenced_tweets)) {
      for (const r of post.referenced_tweets) {
        const id = canon(r?.id)
        if (id === undefined || typeof r.type !== 'string') continue
        this.refs.push({ type: r.type, id })
        if (r.type === 'replied_to') inReplyTo ??= id
      }
    }
    this.inReplyTo = inReplyTo
    this.authorId = canon(post.author_id)
    this.replyToUserId = canon(post.in_reply_to_user_id)
    this.conversationId = canon(post.conversation_id)
    this.authorUsername = usernameOf(this.authorId, includes, author ?? post.author)
    this.replyToUsername = usernameOf(this.replyToUserId, includes, post.in_reply_to_user)
  }

  /** `' ' + searchTerms.join(' ') + ' '`: phrases are a substring test here, LIKE in SQL. */
  get joined(): string {
    this.joinedText ??= ` ${this.list.join(' ')} `
    return this.joinedText
  }
}

export function viewOf(post: WirePost, includes?: Includes, author?: WireUser): PostView {
  return new PostView(post, includes, author)
}
