/** The API's wire shapes that the viewer reads (docs/api.md §5): plain data, no browser APIs. */

export interface Post {
  id: string
  text: string
  author_id?: string
  created_at?: string
  lang?: string
  conversation_id?: string
  public_metrics?: {
    reply_count?: number
    retweet_count?: number
    like_count?: number
    quote_count?: number
  }
  referenced_tweets?: Array<{ type: string; id: string }>
  thread?: {
    depth: number
    parent_id?: string
    reply_count?: number
    descendant_count?: number
    missing_parent?: boolean
    /** Set when X withdrew the Post: the API then sends only `id` and `thread` (docs/api.md §7). */
    withdrawn?: 'deleted' | 'unavailable'
  }
}

export interface User {
  id: string
  name?: string
  username?: string
}

export interface Page<T, M> {
  data?: T[]
  includes?: { users?: User[] }
  errors?: Array<{ resource_id?: string; value?: string; detail?: string; title?: string }>
  meta?: M
}
