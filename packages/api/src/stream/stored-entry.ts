import {
  formatPostTime,
  isId,
  snowflakeTime,
  type StoredPost,
  type StoredUser,
  type WirePost,
  type WireUser,
} from '@threadline/domain'

/** A Post read from the `stored` stream: the stored object and its author (when stored). */
export interface StreamPost {
  /** The Redis Stream entry id (`<ms>-<seq>`): the stream's order. */
  streamId: string
  post: StoredPost
  /** The upstream object as stored: what rules match against. */
  wire: WirePost
  author?: StoredUser
  authorWire?: WireUser
}

const idOrNull = (v: unknown): string | null => (isId(v) ? v : null)

/**
 * Reads one `stored` entry body (`{data, author}`). Undefined when it is not a Post we can shape,
 * so one odd entry never stops a stream.
 */
export function parseStreamPost(
  streamId: string,
  id: string,
  body: string,
): StreamPost | undefined {
  let parsed: { data?: unknown; author?: unknown }
  try {
    parsed = JSON.parse(body) as typeof parsed
  } catch {
    return undefined
  }
  const raw = parsed?.data as WirePost | undefined
  if (!raw || typeof raw !== 'object' || typeof raw.text !== 'string' || !isId(id)) return undefined
  const created =
    typeof raw.created_at === 'string' && !Number.isNaN(Date.parse(raw.created_at))
      ? formatPostTime(new Date(raw.created_at))
      : (snowflakeTime(id) ?? new Date(0)).toISOString()
  const post: StoredPost = {
    id,
    text: raw.text,
    created_at: created,
    conversation_id: idOrNull(raw.conversation_id),
    author_id: idOrNull(raw.author_id),
    in_reply_to_user_id: idOrNull(raw.in_reply_to_user_id),
    raw,
  }
  const a = parsed.author as WireUser | undefined
  const author =
    a && typeof a === 'object' && isId(a.id) && typeof a.username === 'string'
      ? {
          id: a.id,
          name: typeof a.name === 'string' ? a.name : a.username,
          username: a.username,
          raw: a,
        }
      : undefined
  return { streamId, post, wire: raw, author, authorWire: author ? a : undefined }
}
