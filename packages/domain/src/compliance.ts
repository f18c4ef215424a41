import { isId, snowflakeTime } from './ids.js'
import { parseTime } from './time.js'

// What X withdraws (docs/api.md §7): its compliance events as Threadline keeps them, read from X's
// compliance streams and batch compliance job results, and written back in X's shapes.

export type TweetComplianceAction = 'delete' | 'withheld' | 'drop' | 'undrop' | 'tweet_edit'
export type UserComplianceAction =
  | 'user_delete'
  | 'user_undelete'
  | 'user_protect'
  | 'user_unprotect'
  | 'user_suspend'
  | 'user_unsuspend'
  | 'user_withheld'
  | 'scrub_geo'
  | 'user_profile_modification'
export type ComplianceAction = TweetComplianceAction | UserComplianceAction

export const TWEET_COMPLIANCE_ACTIONS: readonly TweetComplianceAction[] = [
  'delete',
  'withheld',
  'drop',
  'undrop',
  'tweet_edit',
]
export const USER_COMPLIANCE_ACTIONS: readonly UserComplianceAction[] = [
  'user_delete',
  'user_undelete',
  'user_protect',
  'user_unprotect',
  'user_suspend',
  'user_unsuspend',
  'user_withheld',
  'scrub_geo',
  'user_profile_modification',
]
/** Every action, as the non-empty tuple validators take. */
export const COMPLIANCE_ACTIONS = [...TWEET_COMPLIANCE_ACTIONS, ...USER_COMPLIANCE_ACTIONS] as [
  ComplianceAction,
  ...ComplianceAction[],
]

export interface ComplianceEvent {
  kind: 'tweet' | 'user'
  /** The Post's id (kind tweet) or the user's id (kind user). */
  id: string
  /** Kind tweet: the Post's author when the event names it. */
  authorId?: string
  action: ComplianceAction
  /** Batch jobs' reason (deleted, protected, suspended, deactivated, …). */
  reason?: string
  /** ISO 8601, X's event_at. */
  eventAt: string
  withheldInCountries?: string[]
  /** scrub_geo. */
  upToTweetId?: string
  /** tweet_edit: the first version's id and every version's id. */
  initialTweetId?: string
  editTweetIds?: string[]
  /** user_profile_modification. */
  profileField?: string
  newValue?: string
  /** ISO 8601, when Threadline first saw it. */
  receivedAt: string
  source: 'stream' | 'job' | 'import'
}

export type ComplianceParse = ComplianceEvent | { error: string }

/** The reason word a withdrawal carries when its event names none (as X's batch jobs write it). */
export function withdrawalReason(
  e: Pick<ComplianceEvent, 'action' | 'reason'>,
): string | undefined {
  if (e.reason !== undefined) return e.reason
  switch (e.action) {
    case 'delete':
      return 'deleted'
    case 'drop':
      return 'dropped'
    case 'user_protect':
      return 'protected'
    case 'user_suspend':
      return 'suspended'
    case 'user_delete':
      return 'deactivated'
    default:
      return undefined
  }
}

const COUNTRY_CODE = /^[A-Z]{2}$/

type Fields = Record<string, unknown>
const isObject = (v: unknown): v is Fields =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

/** Parses a time X wrote into the canonical ISO form, so that one event logged twice is equal. */
function isoTime(value: unknown): string | undefined {
  return parseTime(value)?.toISOString()
}

function countries(value: unknown): string[] | { error: string } {
  if (!Array.isArray(value) || value.length === 0) {
    return { error: 'withheld_in_countries must be a non-empty array' }
  }
  if (!value.every((c): c is string => typeof c === 'string' && COUNTRY_CODE.test(c))) {
    return { error: 'withheld_in_countries must hold two-letter country codes' }
  }
  return [...new Set(value)]
}

/**
 * One line of X's tweet or user compliance stream (TweetComplianceStreamResponse /
 * UserComplianceStreamResponse): the whole body `{"data": {...}}` or its `data`. An `errors` body
 * or anything malformed is `{ error }`.
 */
export function complianceEventFromStream(body: unknown, receivedAt: string): ComplianceParse {
  if (!isObject(body)) return { error: 'a compliance event must be a JSON object' }
  if (Array.isArray(body.errors)) return { error: 'the compliance stream sent errors' }
  const data = isObject(body.data) ? body.data : body
  const actions = Object.keys(data)
  if (actions.length !== 1) return { error: 'a compliance event names exactly one action' }
  const action = actions[0]!
  const payload = data[action]
  if (!isObject(payload)) return { error: `${action}: not an object` }
  const eventAt = isoTime(payload.event_at)
  if (!eventAt) return { error: `${action}: event_at must be an RFC 3339 time` }
  const base = { eventAt, receivedAt, source: 'stream' as const }

  if ((TWEET_COMPLIANCE_ACTIONS as readonly string[]).includes(action)) {
    const tweet = payload.tweet
    if (!isObject(tweet) || !isId(tweet.id)) return { error: `${action}: tweet.id must be an id` }
    if (tweet.author_id !== undefined && !isId(tweet.author_id)) {
      return { error: `${action}: tweet.author_id must be an id` }
    }
    const event: ComplianceEvent = {
      kind: 'tweet',
      id: tweet.id,
      ...(tweet.author_id !== undefined ? { authorId: tweet.author_id } : {}),
      action: action as TweetComplianceAction,
      ...base,
    }
    if (action === 'withheld') {
      const codes = countries(payload.withheld_in_countries)
      if ('error' in codes) return { error: `withheld: ${codes.error}` }
      event.withheldInCountries = codes
    }
    if (action === 'tweet_edit') {
      const edits = payload.edit_tweet_ids
      if (!isId(payload.initial_tweet_id))
        return { error: 'tweet_edit: initial_tweet_id must be an id' }
      if (!Array.isArray(edits) || edits.length === 0 || !edits.every(isId)) {
        return { error: 'tweet_edit: edit_tweet_ids must be a non-empty array of ids' }
      }
      event.initialTweetId = payload.initial_tweet_id
      event.editTweetIds = edits
    }
    return event
  }

  if ((USER_COMPLIANCE_ACTIONS as readonly string[]).includes(action)) {
    const user = payload.user
    if (!isObject(user) || !isId(user.id)) return { error: `${action}: user.id must be an id` }
    const event: ComplianceEvent = {
      kind: 'user',
      id: user.id,
      action: action as UserComplianceAction,
      ...base,
    }
    if (action === 'user_withheld') {
      const codes = countries(payload.withheld_in_countries)
      if ('error' in codes) return { error: `user_withheld: ${codes.error}` }
      event.withheldInCountries = codes
    }
    if (action === 'scrub_geo') {
      if (!isId(payload.up_to_tweet_id)) return { error: 'scrub_geo: up_to_tweet_id must be an id' }
      event.upToTweetId = payload.up_to_tweet_id
    }
    if (action === 'user_profile_modification') {
      if (typeof payload.profile_field !== 'string' || typeof payload.new_value !== 'string') {
        return { error: 'user_profile_modification: profile_field and new_value must be strings' }
      }
      event.profileField = payload.profile_field
      event.newValue = payload.new_value
    }
    return event
  }
  return { error: `unknown compliance action: ${action.slice(0, 64)}` }
}

/** A batch job's reason, for a user, as the user event it stands for. */
const USER_ACTION_BY_REASON: Record<string, UserComplianceAction> = {
  deleted: 'user_delete',
  deactivated: 'user_delete',
  suspended: 'user_suspend',
  protected: 'user_protect',
}
const REASON = /^[a-z_]{1,32}$/

/**
 * One line of a batch compliance job's result, `{"id","action","created_at","redacted_at",
 * "reason"}` (a parsed object or the line's text). X names every withdrawal `delete` and says why
 * in `reason`: for a Post, `deleted` erases it, `scrub_geo` erases its geo, any other reason
 * (protected, suspended, deactivated, …) hides it; for a user, the reason picks the user event.
 * `event_at` is `redacted_at`, else `created_at`, so the same line read twice is one event.
 */
export function complianceEventFromJobResult(
  kind: 'tweet' | 'user',
  line: unknown,
  receivedAt: string,
): ComplianceParse {
  let value = line
  if (typeof line === 'string') {
    try {
      value = JSON.parse(line)
    } catch {
      return { error: 'a result line must be JSON' }
    }
  }
  if (!isObject(value)) return { error: 'a result line must be a JSON object' }
  if (!isId(value.id)) return { error: 'id must be an id' }
  if (typeof value.reason !== 'string' || !REASON.test(value.reason)) {
    return { error: 'reason must be a word' }
  }
  if (value.action !== undefined && typeof value.action !== 'string') {
    return { error: 'action must be a string' }
  }
  const eventAt = isoTime(value.redacted_at) ?? isoTime(value.created_at)
  if (!eventAt) return { error: 'redacted_at or created_at must be an RFC 3339 time' }
  const reason = value.reason
  const base = { kind, id: value.id, reason, eventAt, receivedAt, source: 'job' as const }
  if (kind === 'tweet') {
    const action: ComplianceAction =
      reason === 'deleted' ? 'delete' : reason === 'scrub_geo' ? 'scrub_geo' : 'drop'
    return action === 'scrub_geo' ? { ...base, action, upToTweetId: value.id } : { ...base, action }
  }
  const action = USER_ACTION_BY_REASON[reason]
  if (!action) return { error: `no user event stands for reason ${reason}` }
  return { ...base, action }
}

/** A logged event in X's compliance-stream shape, e.g. `{"data":{"delete":{"tweet":{…},"event_at"}}}`. */
export function complianceStreamBody(e: ComplianceEvent): object {
  // A Post-level scrub_geo (from a batch job) has no stream shape of its own: X sends it per user.
  if (e.kind === 'tweet' && e.action !== 'scrub_geo') {
    const tweet = { id: e.id, ...(e.authorId !== undefined ? { author_id: e.authorId } : {}) }
    if (e.action === 'tweet_edit') {
      return {
        data: {
          tweet_edit: {
            tweet: { id: e.id },
            event_at: e.eventAt,
            initial_tweet_id: e.initialTweetId ?? e.id,
            edit_tweet_ids: e.editTweetIds ?? [e.id],
          },
        },
      }
    }
    return {
      data: {
        [e.action]: {
          tweet,
          event_at: e.eventAt,
          ...(e.action === 'withheld'
            ? { withheld_in_countries: e.withheldInCountries ?? [] }
            : {}),
        },
      },
    }
  }
  const body: Fields = { user: { id: e.kind === 'user' ? e.id : (e.authorId ?? e.id) } }
  body.event_at = e.eventAt
  if (e.action === 'user_withheld') body.withheld_in_countries = e.withheldInCountries ?? []
  if (e.action === 'scrub_geo') body.up_to_tweet_id = e.upToTweetId ?? e.id
  if (e.action === 'user_profile_modification') {
    body.profile_field = e.profileField ?? ''
    body.new_value = e.newValue ?? ''
  }
  return { data: { [e.action]: body } }
}

/**
 * One line of a batch compliance job's result for a logged withdrawal, as X writes it: `action`
 * is always `delete`, `reason` says why, `created_at` is when the Post (or user) was made (from
 * the snowflake id, else `createdAt`, else the event's time) and `redacted_at` when it was withdrawn.
 */
export function complianceJobResultLine(
  e: Pick<ComplianceEvent, 'id' | 'action' | 'reason' | 'eventAt'>,
  createdAt?: string,
): string {
  const reason = withdrawalReason(e) ?? (e.action === 'scrub_geo' ? 'scrub_geo' : e.action)
  return JSON.stringify({
    id: e.id,
    action: 'delete',
    created_at: createdAt ?? snowflakeTime(e.id)?.toISOString() ?? e.eventAt,
    redacted_at: e.eventAt,
    reason,
  })
}
