/**
 * The parsed form of a query. Every node is already normalised (ids canonical, usernames and terms
 * lower-cased and tokenised) so that the SQL compiler and the matcher never re-interpret input.
 */
export type IdField = 'conversation_id' | 'in_reply_to' | 'quotes_of' | 'retweets_of'
export type IsValue = 'reply' | 'quote' | 'retweet'
export type HasValue = 'media' | 'links' | 'mentions' | 'hashtags' | 'cashtags'

export type Ast =
  | { type: 'and'; children: Ast[] }
  | { type: 'or'; children: Ast[] }
  | { type: 'not'; child: Ast }
  /** A bare word or a "quoted phrase": its tokens must appear contiguously (one token: anywhere). */
  | { type: 'text'; terms: string[]; phrase: boolean; raw: string }
  /** `#tag`, `@user`, `$cash`: one prefixed search term. */
  | { type: 'entity'; kind: 'hashtag' | 'mention' | 'cashtag'; term: string }
  /** `url:` — URL tokens (prefixed with `/`), contiguous within the Post's URL terms. */
  | { type: 'url'; terms: string[] }
  /** `from:` / `to:` — a username (lower-cased) and/or a numeric id. */
  | { type: 'user'; role: 'from' | 'to'; username?: string; id?: string }
  | { type: 'id'; field: IdField; id: string }
  | { type: 'is'; value: IsValue }
  | { type: 'has'; value: HasValue }
  | { type: 'lang'; value: string }
