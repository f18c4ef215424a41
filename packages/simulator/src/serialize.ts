import type { SimPost, SimUser, World } from './world.js'

/** What a request asked for: fields of Posts and users, and expansions. */
export interface View {
  /** Every field the simulator makes was asked for: use the cached serialisation. */
  postAll: boolean
  postFields: Set<string>
  userAll: boolean
  userFields: Set<string>
  expansions: Set<string>
}

// The fields the simulator's Posts and users carry; asking for all of them takes the fast path.
const POST_KEYS = [
  'author_id',
  'conversation_id',
  'created_at',
  'in_reply_to_user_id',
  'referenced_tweets',
  'public_metrics',
  'lang',
  'edit_history_tweet_ids',
  'entities',
  'possibly_sensitive',
  'reply_settings',
  'edit_controls',
]
const USER_KEYS = [
  'created_at',
  'description',
  'location',
  'url',
  'profile_image_url',
  'protected',
  'verified',
  'verified_type',
  'public_metrics',
]

/** The field parameters a request gave (each as written). */
export interface FieldValues {
  'tweet.fields'?: string | undefined
  'post.fields'?: string | undefined
  'user.fields'?: string | undefined
  expansions?: string | undefined
}

export function viewOf(params: FieldValues): View {
  const list = (name: 'user.fields' | 'expansions') =>
    (params[name] ?? '').split(',').filter((v) => v !== '')
  const tweetFields = params['tweet.fields'] ?? params['post.fields']
  // X returns id, text and edit_history_tweet_ids when no tweet.fields are asked for.
  const postFields = new Set(
    tweetFields === undefined ? ['edit_history_tweet_ids'] : tweetFields.split(','),
  )
  const userFields = new Set(list('user.fields'))
  return {
    postAll: POST_KEYS.every((k) => postFields.has(k)),
    postFields,
    userAll: USER_KEYS.every((k) => userFields.has(k)),
    userFields,
    expansions: new Set(list('expansions')),
  }
}

export function postJson(world: World, post: SimPost, view: View): string {
  if (view.postAll) return world.json(post)
  const out: Record<string, unknown> = { id: post.wire.id, text: post.wire.text }
  for (const key of view.postFields) {
    const value = post.wire[key]
    if (value !== undefined) out[key] = value
  }
  return JSON.stringify(out)
}

export function userJson(user: SimUser, view: View): string {
  if (view.userAll) return user.json
  const out: Record<string, unknown> = {
    id: user.id,
    name: user.wire.name,
    username: user.wire.username,
  }
  for (const key of view.userFields) {
    const value = user.wire[key]
    if (value !== undefined) out[key] = value
  }
  return JSON.stringify(out)
}

/** Gathers `includes` and not-found `errors` over one or more primary Posts, de-duplicated. */
export class IncludesBuilder {
  private readonly users = new Map<string, string>()
  private readonly tweets = new Map<string, string>()
  private readonly errors: string[] = []
  private readonly missing = new Set<string>()

  constructor(
    private readonly world: World,
    private readonly view: View,
  ) {}

  add(post: SimPost): void {
    const exp = this.view.expansions
    if (exp.size === 0) return
    if (exp.has('author_id')) this.user(post.authorId, 'author_id')
    const replyTo = post.wire.in_reply_to_user_id
    if (replyTo !== undefined && exp.has('in_reply_to_user_id'))
      this.user(replyTo, 'in_reply_to_user_id')
    if (exp.has('entities.mentions.username')) {
      const mentions = (post.wire.entities as { mentions?: { id: string }[] } | undefined)?.mentions
      for (const m of mentions ?? []) this.user(m.id, 'entities.mentions.username')
    }
    const withRefs = exp.has('referenced_tweets.id')
    const withRefAuthors = exp.has('referenced_tweets.id.author_id')
    if (withRefs || withRefAuthors) {
      for (const id of post.refIds) {
        const ref = this.world.get(id)
        if (!ref) {
          this.notFound('tweet', 'referenced_tweets.id', id)
          continue
        }
        if (withRefs && !this.tweets.has(id))
          this.tweets.set(id, postJson(this.world, ref, this.view))
        if (withRefAuthors) this.user(ref.authorId, 'referenced_tweets.id.author_id')
      }
    }
  }

  private user(id: string, parameter: string) {
    if (this.users.has(id)) return
    const user = this.world.user(id)
    if (user) this.users.set(id, userJson(user, this.view))
    else this.notFound('user', parameter, id)
  }

  private notFound(resource: 'tweet' | 'user', parameter: string, id: string) {
    const key = `${parameter}:${id}`
    if (this.missing.has(key)) return
    this.missing.add(key)
    this.errors.push(
      JSON.stringify({
        value: id,
        detail: `Could not find ${resource} with ${parameter}: [${id}].`,
        title: 'Not Found Error',
        resource_type: resource,
        parameter,
        resource_id: id,
        type: 'https://api.twitter.com/2/problems/resource-not-found',
      }),
    )
  }

  /** An error item of the caller's own (lookup misses), listed with the expansion errors. */
  error(item: Record<string, unknown>): void {
    this.errors.push(JSON.stringify(item))
  }

  get errorCount(): number {
    return this.errors.length
  }

  /** `,"includes":{…}` (or nothing) followed by `,"errors":[…]` (or nothing). */
  suffix(): string {
    let out = ''
    if (this.users.size > 0 || this.tweets.size > 0) {
      const parts: string[] = []
      if (this.users.size > 0) parts.push(`"users":[${[...this.users.values()].join(',')}]`)
      if (this.tweets.size > 0) parts.push(`"tweets":[${[...this.tweets.values()].join(',')}]`)
      out += `,"includes":{${parts.join(',')}}`
    }
    if (this.errors.length > 0) out += `,"errors":[${this.errors.join(',')}]`
    return out
  }
}
