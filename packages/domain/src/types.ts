/** The parts of X's Post object that Threadline reads; the rest is kept as given. */
export type ReferenceType = 'replied_to' | 'quoted' | 'retweeted'

export const REFERENCE_TYPES: readonly ReferenceType[] = ['replied_to', 'quoted', 'retweeted']

export interface ReferencedTweet {
  type: ReferenceType
  id: string
}

export interface PublicMetrics {
  retweet_count: number
  reply_count: number
  like_count: number
  quote_count: number
  bookmark_count?: number
  impression_count?: number
}

export interface WirePost {
  id: string
  text: string
  author_id?: string
  conversation_id?: string
  created_at?: string
  in_reply_to_user_id?: string
  referenced_tweets?: ReferencedTweet[]
  public_metrics?: PublicMetrics
  lang?: string
  edit_history_tweet_ids?: string[]
  [field: string]: unknown
}

export interface WireUser {
  id: string
  name: string
  username: string
  [field: string]: unknown
}

export interface Includes {
  users?: WireUser[]
  tweets?: WirePost[]
  [kind: string]: unknown
}

/** A Post as the writer stores it: the indexed columns plus the upstream object. */
export interface PostRow {
  id: string
  conversation_id: string | null
  author_id: string | null
  in_reply_to_user_id: string | null
  in_reply_to_post_id: string | null
  text: string
  created_at: string
  lang: string | null
  retweet_count: number | null
  reply_count: number | null
  like_count: number | null
  quote_count: number | null
  bookmark_count: number | null
  impression_count: string | null
  refs: ReferencedTweet[]
  /** `searchTerms(raw)`: what search, counts and stream rules match keywords against. */
  search_terms: string[]
  raw: WirePost
  observed_at: string
  /** Seen only in `includes.tweets` of this batch (not as primary data): a refresh, not news. */
  included: boolean
}

export interface UserRow {
  id: string
  name: string
  username: string
  raw: WireUser
  observed_at: string
}

export interface Reject {
  reason: string
  raw: string
}

/** An activity subscription as event matching needs it (read by the db, matched by activity). */
export interface MatchableSubscription {
  id: string
  app_id: string
  event_type: string
  filter_user_id: string | null
  filter_keyword: string | null
  tag: string | null
  webhook_id: string | null
}
