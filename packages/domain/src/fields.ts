import { formatPostTime } from './time.js'
import type { Includes, WirePost, WireUser } from './types.js'

/** X's `tweet.fields` values (OpenAPI `TweetFieldsParameter`), in X's order. */
export const TWEET_FIELDS = [
  'article',
  'attachments',
  'author_id',
  'card_uri',
  'community_id',
  'context_annotations',
  'conversation_id',
  'created_at',
  'display_text_range',
  'edit_controls',
  'edit_history_tweet_ids',
  'entities',
  'geo',
  'id',
  'in_reply_to_user_id',
  'lang',
  'media_metadata',
  'non_public_metrics',
  'note_tweet',
  'organic_metrics',
  'possibly_sensitive',
  'promoted_metrics',
  'public_metrics',
  'referenced_tweets',
  'reply_settings',
  'scopes',
  'source',
  'suggested_source_links',
  'suggested_source_links_with_counts',
  'text',
  'withheld',
] as const

export const USER_FIELDS = [
  'affiliation',
  'confirmed_email',
  'connection_status',
  'created_at',
  'description',
  'entities',
  'id',
  'is_identity_verified',
  'location',
  'most_recent_tweet_id',
  'name',
  'parody',
  'pinned_tweet_id',
  'profile_banner_url',
  'profile_image_url',
  'protected',
  'public_metrics',
  'receives_your_dm',
  'subscription',
  'subscription_type',
  'url',
  'username',
  'verified',
  'verified_followers_count',
  'verified_type',
  'withheld',
] as const

export const TWEET_EXPANSIONS = [
  'article.cover_media',
  'article.media_entities',
  'attachments.media_keys',
  'attachments.media_source_tweet',
  'attachments.poll_ids',
  'author_id',
  'edit_history_tweet_ids',
  'entities.mentions.username',
  'geo.place_id',
  'in_reply_to_user_id',
  'entities.note.mentions.username',
  'referenced_tweets.id',
  'referenced_tweets.id.attachments.media_keys',
  'referenced_tweets.id.author_id',
] as const

export const MEDIA_FIELDS = [
  'alt_text',
  'duration_ms',
  'height',
  'media_key',
  'non_public_metrics',
  'organic_metrics',
  'preview_image_url',
  'promoted_metrics',
  'public_metrics',
  'type',
  'url',
  'variants',
  'width',
] as const

export const POLL_FIELDS = [
  'duration_minutes',
  'end_datetime',
  'id',
  'options',
  'voting_status',
] as const

export const PLACE_FIELDS = [
  'contained_within',
  'country',
  'country_code',
  'full_name',
  'geo',
  'id',
  'name',
  'place_type',
] as const

export const SEARCH_COUNT_FIELDS = ['end', 'start', 'tweet_count'] as const

/** A Post as read back from storage: the columns that override the upstream object, and the object. */
export interface StoredPost {
  id: string
  text: string
  created_at: Date | string
  conversation_id: string | null
  author_id: string | null
  in_reply_to_user_id: string | null
  raw: WirePost
  /** Set once X withdrew it: the read pipeline's rules decide what is served in its place. */
  withdrawn?: Withdrawal | null
  /** X's reason for it (deleted, protected, suspended, …): `protected` answers a lookup differently. */
  withdrawn_reason?: string | null
}

/** Why a stored Post is no longer served: deleted on X, or hidden (protected, suspended, dropped). */
export type Withdrawal = 'deleted' | 'unavailable'

export interface StoredUser {
  id: string
  name: string
  username: string
  raw: WireUser
}

/** What the client asked for: `tweet.fields`, `user.fields` and `expansions`. */
export interface FieldSelection {
  tweetFields: ReadonlySet<string>
  userFields: ReadonlySet<string>
  expansions: ReadonlySet<string>
}

export function selection(
  tweetFields: Iterable<string> = [],
  expansions: Iterable<string> = [],
  userFields: Iterable<string> = [],
): FieldSelection {
  return {
    tweetFields: new Set(tweetFields),
    expansions: new Set(expansions),
    userFields: new Set(userFields),
  }
}

/** The Post fields an expansion adds to the Post it expands from. */
const LINKING_FIELDS: Record<string, string> = {
  author_id: 'author_id',
  in_reply_to_user_id: 'in_reply_to_user_id',
  'referenced_tweets.id': 'referenced_tweets',
  'referenced_tweets.id.author_id': 'referenced_tweets',
  'entities.mentions.username': 'entities',
  edit_history_tweet_ids: 'edit_history_tweet_ids',
}

/** The fields to render on primary Posts: requested ones plus the expansions' linking fields. */
export function primaryFields(sel: FieldSelection): Set<string> {
  const fields = new Set(sel.tweetFields)
  for (const e of sel.expansions) {
    const link = LINKING_FIELDS[e]
    if (link) fields.add(link)
  }
  return fields
}

/** The fields to render on included Posts: `tweet.fields`, plus author_id when their authors are expanded. */
export function includedFields(sel: FieldSelection): Set<string> {
  const fields = new Set(sel.tweetFields)
  if (sel.expansions.has('referenced_tweets.id.author_id')) fields.add('author_id')
  return fields
}

function postField(post: StoredPost, field: string): unknown {
  switch (field) {
    case 'created_at':
      return typeof post.created_at === 'string'
        ? formatPostTime(new Date(post.created_at))
        : formatPostTime(post.created_at)
    case 'conversation_id':
      return post.conversation_id ?? post.raw.conversation_id
    case 'author_id':
      return post.author_id ?? post.raw.author_id
    case 'in_reply_to_user_id':
      return post.in_reply_to_user_id ?? post.raw.in_reply_to_user_id
    case 'edit_history_tweet_ids': {
      const history = post.raw.edit_history_tweet_ids
      return Array.isArray(history) && history.length > 0 ? history : [post.id]
    }
    default:
      return post.raw[field]
  }
}

/**
 * A stored Post in the requested wire form: `id`, `text` and each field of `fields` that the Post
 * has. Fields the upstream never gave are left out, never null.
 */
export function shapePost(post: StoredPost, fields: ReadonlySet<string>): WirePost {
  const out: WirePost = { id: post.id, text: post.text }
  for (const field of fields) {
    if (field === 'id' || field === 'text') continue
    const value = postField(post, field)
    if (value !== undefined && value !== null) out[field] = value
  }
  return out
}

/** A stored user in the requested wire form: `id`, `name`, `username` and the requested fields it has. */
export function shapeUser(user: StoredUser, fields: ReadonlySet<string>): WireUser {
  const out: WireUser = { id: user.id, name: user.name, username: user.username }
  for (const field of fields) {
    if (field === 'id' || field === 'name' || field === 'username') continue
    const value = user.raw[field]
    if (value !== undefined && value !== null) out[field] = value
  }
  return out
}

/** The Posts and users that the expansions of a page point at. */
export interface ExpansionTargets {
  tweetIds: string[]
  userIds: string[]
  usernames: string[]
}

function mentionUsernames(post: StoredPost): string[] {
  const mentions = (post.raw.entities as { mentions?: unknown } | undefined)?.mentions
  if (!Array.isArray(mentions)) return []
  return mentions
    .map((m) => (m as { username?: unknown } | null)?.username)
    .filter((u): u is string => typeof u === 'string' && u.length > 0)
}

function referencedIds(post: StoredPost): string[] {
  const refs = post.raw.referenced_tweets
  return Array.isArray(refs) ? refs.map((r) => r.id) : []
}

/**
 * First pass of the expansion plan: what the primary Posts point at directly. The authors of
 * referenced Posts (`referenced_tweets.id.author_id`) need those Posts first: see `secondTargets`.
 */
export function firstTargets(posts: readonly StoredPost[], sel: FieldSelection): ExpansionTargets {
  const tweetIds = new Set<string>()
  const userIds = new Set<string>()
  const usernames = new Set<string>()
  const e = sel.expansions
  const wantsRefs = e.has('referenced_tweets.id') || e.has('referenced_tweets.id.author_id')
  for (const post of posts) {
    if (e.has('author_id')) {
      const a = postField(post, 'author_id')
      if (typeof a === 'string') userIds.add(a)
    }
    if (e.has('in_reply_to_user_id')) {
      const u = postField(post, 'in_reply_to_user_id')
      if (typeof u === 'string') userIds.add(u)
    }
    if (e.has('entities.mentions.username')) {
      for (const name of mentionUsernames(post)) usernames.add(name.toLowerCase())
    }
    if (wantsRefs) for (const id of referencedIds(post)) tweetIds.add(id)
    if (e.has('edit_history_tweet_ids')) {
      for (const id of postField(post, 'edit_history_tweet_ids') as string[]) tweetIds.add(id)
    }
  }
  return { tweetIds: [...tweetIds], userIds: [...userIds], usernames: [...usernames] }
}

/** Second pass: the authors of the referenced Posts that were found, minus users already loaded. */
export function secondTargets(
  referenced: readonly StoredPost[],
  sel: FieldSelection,
  loadedUserIds: ReadonlySet<string>,
): string[] {
  if (!sel.expansions.has('referenced_tweets.id.author_id')) return []
  const ids = new Set<string>()
  for (const post of referenced) {
    const a = postField(post, 'author_id')
    if (typeof a === 'string' && !loadedUserIds.has(a)) ids.add(a)
  }
  return [...ids]
}

/** X's partial error for an expansion (or lookup) target that is not stored. */
export interface ResourceNotFound {
  value: string
  detail: string
  title: 'Not Found Error'
  resource_type: 'tweet' | 'user'
  parameter: string
  resource_id: string
  type: 'https://api.twitter.com/2/problems/resource-not-found'
}

/** X's partial error for a Post it withholds from the caller (a protected author's). */
export interface ResourceUnauthorized {
  value: string
  detail: string
  title: 'Authorization Error'
  resource_type: 'tweet'
  parameter: string
  resource_id: string
  section: 'data' | 'includes'
  type: 'https://api.twitter.com/2/problems/not-authorized-for-resource'
}

export function notAuthorized(
  parameter: string,
  value: string,
  section: 'data' | 'includes' = 'data',
): ResourceUnauthorized {
  return {
    value,
    detail: `Sorry, you are not authorized to see the Tweet with ${parameter}: [${value}].`,
    title: 'Authorization Error',
    resource_type: 'tweet',
    parameter,
    resource_id: value,
    section,
    type: 'https://api.twitter.com/2/problems/not-authorized-for-resource',
  }
}

export function notFound(
  resourceType: 'tweet' | 'user',
  parameter: string,
  value: string,
): ResourceNotFound {
  return {
    value,
    detail: `Could not find ${resourceType} with ${parameter}: [${value}].`,
    title: 'Not Found Error',
    resource_type: resourceType,
    parameter,
    resource_id: value,
    type: 'https://api.twitter.com/2/problems/resource-not-found',
  }
}

/** X's partial error for a user it suspended, named by id or username in a user lookup. */
export interface UserSuspended {
  value: string
  detail: string
  title: 'Forbidden'
  resource_type: 'user'
  parameter: string
  resource_id: string
  type: 'https://api.twitter.com/2/problems/resource-not-found'
}

export function userSuspended(parameter: string, value: string): UserSuspended {
  return {
    value,
    detail: `User has been suspended: [${value}].`,
    title: 'Forbidden',
    resource_type: 'user',
    parameter,
    resource_id: value,
    type: 'https://api.twitter.com/2/problems/resource-not-found',
  }
}

/** Everything loaded for a page's expansions, keyed for lookup. */
export interface LoadedTargets {
  posts: ReadonlyMap<string, StoredPost>
  users: ReadonlyMap<string, StoredUser>
  /** Users by lower-cased username. */
  usersByName: ReadonlyMap<string, StoredUser>
  /** Posts withheld from includes because their author is protected: named as X does. */
  protectedPosts?: ReadonlySet<string>
}

/**
 * Builds `includes` and the not-found `errors` for a page, walking the primary Posts in order so
 * that included users and Posts come out de-duplicated in first-seen order.
 */
export function assembleIncludes(
  posts: readonly StoredPost[],
  sel: FieldSelection,
  loaded: LoadedTargets,
): { includes?: Includes; errors: Array<ResourceNotFound | ResourceUnauthorized> } {
  const e = sel.expansions
  const users = new Map<string, WireUser>()
  const tweets = new Map<string, WirePost>()
  const errors = new Map<string, ResourceNotFound | ResourceUnauthorized>()
  const tFields = includedFields(sel)
  const uFields = sel.userFields

  const addUser = (id: string, parameter: string) => {
    if (users.has(id)) return
    const user = loaded.users.get(id)
    if (user) users.set(id, shapeUser(user, uFields))
    else if (!errors.has(`${parameter}:${id}`))
      errors.set(`${parameter}:${id}`, notFound('user', parameter, id))
  }
  const addTweet = (id: string, parameter: string): StoredPost | undefined => {
    const post = loaded.posts.get(id)
    if (post) {
      if (!tweets.has(id)) tweets.set(id, shapePost(post, tFields))
    } else if (!errors.has(`${parameter}:${id}`)) {
      errors.set(
        `${parameter}:${id}`,
        loaded.protectedPosts?.has(id)
          ? notAuthorized(parameter, id, 'includes')
          : notFound('tweet', parameter, id),
      )
    }
    return post
  }

  for (const post of posts) {
    if (e.has('author_id')) {
      const a = postField(post, 'author_id')
      if (typeof a === 'string') addUser(a, 'author_id')
    }
    if (e.has('in_reply_to_user_id')) {
      const u = postField(post, 'in_reply_to_user_id')
      if (typeof u === 'string') addUser(u, 'in_reply_to_user_id')
    }
    if (e.has('entities.mentions.username')) {
      for (const name of mentionUsernames(post)) {
        const user = loaded.usersByName.get(name.toLowerCase())
        if (user) {
          if (!users.has(user.id)) users.set(user.id, shapeUser(user, uFields))
        } else if (!errors.has(`entities.mentions.username:${name}`)) {
          errors.set(
            `entities.mentions.username:${name}`,
            notFound('user', 'entities.mentions.username', name),
          )
        }
      }
    }
    const wantsRefs = e.has('referenced_tweets.id')
    const wantsRefAuthors = e.has('referenced_tweets.id.author_id')
    if (wantsRefs || wantsRefAuthors) {
      for (const id of referencedIds(post)) {
        const ref = wantsRefs ? addTweet(id, 'referenced_tweets.id') : loaded.posts.get(id)
        if (ref && wantsRefAuthors) {
          const a = postField(ref, 'author_id')
          if (typeof a === 'string') addUser(a, 'referenced_tweets.id.author_id')
        }
      }
    }
    if (e.has('edit_history_tweet_ids')) {
      for (const id of postField(post, 'edit_history_tweet_ids') as string[]) {
        addTweet(id, 'edit_history_tweet_ids')
      }
    }
  }

  const includes: Includes = {}
  if (users.size > 0) includes.users = [...users.values()]
  if (tweets.size > 0) includes.tweets = [...tweets.values()]
  return {
    includes: users.size > 0 || tweets.size > 0 ? includes : undefined,
    errors: [...errors.values()],
  }
}
