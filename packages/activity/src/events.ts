import { createHash } from 'node:crypto'
import { tokenize } from '@threadline/query'
import type { MatchableSubscription } from '@threadline/domain'

/** The event types Threadline fires (docs/api.md §4.1). */
export const FIRING_EVENT_TYPES = [
  'post.create',
  'post.reply.create',
  'post.quote.create',
  'post.mention.create',
  'profile.update.screenname',
  'profile.update.handle',
] as const
export type FiringEventType = (typeof FIRING_EVENT_TYPES)[number]

/** X's other activity event types: accepted on create, never fired. */
export const OTHER_EVENT_TYPES = [
  'profile.update.bio',
  'profile.update.profile_picture',
  'profile.update.banner_picture',
  'profile.update.geo',
  'profile.update.url',
  'profile.update.verified_badge',
  'profile.update.affiliate_badge',
  'news.new',
  'follow.follow',
  'follow.unfollow',
  'spaces.start',
  'spaces.end',
  'chat.received',
  'chat.sent',
] as const

export const EVENT_TYPES: readonly string[] = [...FIRING_EVENT_TYPES, ...OTHER_EVENT_TYPES]

/** A stored Post as event derivation needs it (built by the delivery service from Postgres). */
export interface EventPost {
  id: string
  author_id: string | null
  in_reply_to_user_id: string | null
  /** Authors of the Posts this one quotes (when those are stored). */
  quoted_author_ids: string[]
  /** Users this Post mentions. */
  mentioned_user_ids: string[]
  text: string
  /** The Post as stored (its upstream object): the payload of Post events. */
  raw: unknown
}

export interface UserChange {
  id: string
  before: { name: string; username: string }
  after: { name: string; username: string }
}

/** Something that happened, before it is matched to subscriptions. */
export interface Candidate {
  event_type: FiringEventType
  /** The user the event concerns (author, user replied to, quoted, mentioned, or changed). */
  user_id: string
  /** Identifies what the event came from, for dedupe and a stable event id. */
  source: string
  payload: unknown
  /** Tokens of the Post's text, for keyword filters (Post events only). */
  tokens?: string[]
}

/** The events a batch's new Posts and user changes give rise to (docs/api.md §4.1 table). */
export function deriveCandidates(
  posts: readonly EventPost[],
  changes: readonly UserChange[],
): Candidate[] {
  const out: Candidate[] = []
  for (const p of posts) {
    const source = `post:${p.id}`
    const tokens = tokenize(p.text)
    if (p.author_id) {
      out.push({ event_type: 'post.create', user_id: p.author_id, source, payload: p.raw, tokens })
    }
    if (p.in_reply_to_user_id) {
      out.push({
        event_type: 'post.reply.create',
        user_id: p.in_reply_to_user_id,
        source,
        payload: p.raw,
        tokens,
      })
    }
    for (const id of new Set(p.quoted_author_ids)) {
      out.push({ event_type: 'post.quote.create', user_id: id, source, payload: p.raw, tokens })
    }
    for (const id of new Set(p.mentioned_user_ids)) {
      out.push({ event_type: 'post.mention.create', user_id: id, source, payload: p.raw, tokens })
    }
  }
  for (const c of changes) {
    // Postgres text cannot hold NUL, so the names are joined as JSON.
    const source = `user:${c.id}:${JSON.stringify([c.before.name, c.before.username, c.after.name, c.after.username])}`
    if (c.before.name !== c.after.name) {
      out.push({
        event_type: 'profile.update.screenname',
        user_id: c.id,
        source,
        payload: { before: c.before.name, after: c.after.name },
      })
    }
    if (c.before.username !== c.after.username) {
      out.push({
        event_type: 'profile.update.handle',
        user_id: c.id,
        source,
        payload: { before: c.before.username, after: c.after.username },
      })
    }
  }
  return out
}

export interface ActivityEvent {
  /** A 64-bit decimal id, the same for the same subscription and source (retries reuse it). */
  event_uuid: string
  event_type: string
  subscription: MatchableSubscription
  /** What fired it (`post:<id>`, a user change): one event per subscription and source. */
  source: string
  /** The JSON line sent to streams and POSTed to webhooks: `{"data":{…}}`. */
  body: string
}

/** A stable 63-bit id from the subscription and what fired it, so a repeat carries the same id. */
export function eventId(subscriptionId: string, candidate: Candidate): string {
  const digest = createHash('sha256')
    .update(`${subscriptionId}\n${candidate.event_type}\n${candidate.user_id}\n${candidate.source}`)
    .digest()
  const n = digest.readBigUInt64BE(0) & 0x7fff_ffff_ffff_ffffn
  return (n === 0n ? 1n : n).toString()
}

export function subscriptionFilter(s: MatchableSubscription): {
  user_id?: string
  keyword?: string
} {
  const filter: { user_id?: string; keyword?: string } = {}
  if (s.filter_user_id !== null) filter.user_id = s.filter_user_id
  if (s.filter_keyword !== null) filter.keyword = s.filter_keyword
  return filter
}

/** The envelope of docs/api.md §4.2: one event, as streams and webhooks receive it. */
export function envelope(id: string, s: MatchableSubscription, c: Candidate): string {
  const data: Record<string, unknown> = {
    event_uuid: id,
    event_type: c.event_type,
    filter: subscriptionFilter(s),
  }
  if (s.tag !== null) data.tag = s.tag
  data.payload = c.payload
  return JSON.stringify({ data })
}

/** True when `needle` occurs as a contiguous run in `haystack`. */
function containsRun(haystack: readonly string[], needle: readonly string[]): boolean {
  if (needle.length === 0) return false
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer
    return true
  }
  return false
}

/**
 * Matches candidates against subscriptions: by (event type, user id) through a hash index, and a
 * keyword (tokenised like search, matched as a phrase) against the Post's tokens. One event per
 * subscription and source, however many ways it matched.
 */
export function matchEvents(
  candidates: readonly Candidate[],
  subscriptions: readonly MatchableSubscription[],
): ActivityEvent[] {
  const byKey = new Map<string, MatchableSubscription[]>()
  for (const s of subscriptions) {
    const key = `${s.event_type}\n${s.filter_user_id ?? '*'}`
    const list = byKey.get(key)
    if (list) list.push(s)
    else byKey.set(key, [s])
  }
  const keywordTokens = new Map<string, string[]>()
  const tokensOf = (keyword: string) => {
    let t = keywordTokens.get(keyword)
    if (!t) keywordTokens.set(keyword, (t = tokenize(keyword)))
    return t
  }
  const seen = new Set<string>()
  const out: ActivityEvent[] = []
  for (const c of candidates) {
    const subs = [
      ...(byKey.get(`${c.event_type}\n${c.user_id}`) ?? []),
      ...(byKey.get(`${c.event_type}\n*`) ?? []),
    ]
    for (const s of subs) {
      if (
        s.filter_keyword !== null &&
        !(c.tokens && containsRun(c.tokens, tokensOf(s.filter_keyword)))
      ) {
        continue
      }
      const id = eventId(s.id, c)
      if (seen.has(id)) continue
      seen.add(id)
      out.push({
        event_uuid: id,
        event_type: c.event_type,
        subscription: s,
        source: c.source,
        body: envelope(id, s, c),
      })
    }
  }
  return out
}
