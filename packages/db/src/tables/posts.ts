import type { Generated, Insertable, Selectable } from 'kysely'
import type { WirePost } from '@threadline/domain'
import type { Int8, Json, Timestamp, GeneratedTimestamp } from './columns.js'

export interface PostsTable {
  id: Int8
  conversation_id: Int8 | null
  author_id: Int8 | null
  in_reply_to_user_id: Int8 | null
  in_reply_to_post_id: Int8 | null
  text: string
  created_at: Timestamp
  lang: string | null
  retweet_count: number | null
  reply_count: number | null
  like_count: number | null
  quote_count: number | null
  bookmark_count: number | null
  impression_count: Int8 | null
  /** `searchTerms(raw)` from @threadline/domain: the query language matches keywords here. */
  search_terms: Generated<string[]>
  /** The upstream Post object, for fields without a column. */
  raw: Json<WirePost>
  /** When the upstream gave this copy; an older copy never replaces a newer one. */
  observed_at: Timestamp
  stored_at: GeneratedTimestamp
  /** What X withdrew (docs/api.md §7): 'deleted' (erased) or 'hidden' (kept, not served). */
  withdrawn: 'deleted' | 'hidden' | null
  /** X's reason word: deleted, protected, suspended, deactivated, dropped, … */
  withdrawn_reason: string | null
  /** The event_at of the last compliance event that set (or cleared) the state. */
  withdrawn_at: Timestamp | null
  withheld_in_countries: string[] | null
  updated_at: GeneratedTimestamp
}
export type Post = Selectable<PostsTable>
export type NewPost = Insertable<PostsTable>
