import { isId, snowflakeTime } from './ids.js'
import { formatPostTime, postTime } from './time.js'
import { searchTerms } from './tokens.js'
import {
  REFERENCE_TYPES,
  type PostRow,
  type ReferencedTweet,
  type Reject,
  type UserRow,
  type WirePost,
  type WireUser,
} from './types.js'

/** What a batch of upstream lines becomes: rows to store, and what could not be stored. */
export interface NormalizedBatch {
  posts: PostRow[]
  users: UserRow[]
  rejects: Reject[]
  /** Lines that were valid but held no Post (error-only pages, keep-alives). */
  empty: number
}

const MAX_INT4 = 2_147_483_647
const METRICS = [
  'retweet_count',
  'reply_count',
  'like_count',
  'quote_count',
  'bookmark_count',
] as const
/** Keys that twarc2's flattened output adds to a Post; they are not part of X's object. */
const TWARC_FLAT_KEYS = ['__twarc', 'author', 'in_reply_to_user', 'matching_rules']

type Obj = Record<string, unknown>
const isObj = (v: unknown): v is Obj => typeof v === 'object' && v !== null && !Array.isArray(v)

class InvalidItemError extends Error {
  override name = 'InvalidItemError'
}

function hasNul(value: unknown): boolean {
  if (typeof value === 'string') return value.includes('\u0000')
  if (Array.isArray(value)) return value.some(hasNul)
  if (isObj(value)) return Object.entries(value).some(([k, v]) => k.includes('\u0000') || hasNul(v))
  return false
}

function optionalId(post: Obj, field: string): string | null {
  const value = post[field]
  if (value === undefined || value === null) return null
  if (!isId(value))
    throw new InvalidItemError(`${field} ${JSON.stringify(value)} is not 1-19 digits`)
  return value
}

function metric(metrics: Obj, name: string): number | null {
  const value = metrics[name]
  if (value === undefined || value === null) return null
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_INT4) {
    throw new InvalidItemError(`public_metrics.${name} ${JSON.stringify(value)} is not a count`)
  }
  return value
}

/**
 * Validates one Post object of X's shape and turns it into a row. Throws InvalidItemError.
 * `mayHoldNul: false` skips the deep NUL scan when the caller already knows the source text has none.
 */
export function toPostRow(input: unknown, observedAt: string, mayHoldNul = true): PostRow {
  if (!isObj(input)) throw new InvalidItemError('Post is not an object')
  if (!isId(input.id)) {
    throw new InvalidItemError(
      input.id === undefined
        ? 'Post has no id'
        : `Post id ${JSON.stringify(input.id)} is not 1-19 digits`,
    )
  }
  const id = input.id
  if (typeof input.text !== 'string') throw new InvalidItemError(`Post ${id} has no text`)
  if (mayHoldNul && hasNul(input))
    throw new InvalidItemError(`Post ${id} contains a \\u0000 character`)

  let created: string | undefined
  if (input.created_at !== undefined) {
    created = postTime(input.created_at)
    if (!created) {
      throw new InvalidItemError(
        `Post ${id} created_at ${JSON.stringify(input.created_at)} is not a time`,
      )
    }
  } else {
    const fromId = snowflakeTime(id)
    if (!fromId) throw new InvalidItemError(`Post ${id} has no created_at`)
    created = formatPostTime(fromId)
  }

  const refs: ReferencedTweet[] = []
  if (input.referenced_tweets !== undefined) {
    if (!Array.isArray(input.referenced_tweets)) {
      throw new InvalidItemError(`Post ${id} referenced_tweets is not a list`)
    }
    for (const ref of input.referenced_tweets) {
      if (!isObj(ref) || !REFERENCE_TYPES.includes(ref.type as never) || !isId(ref.id)) {
        throw new InvalidItemError(
          `Post ${id} has an invalid referenced_tweets item ${JSON.stringify(ref)}`,
        )
      }
      refs.push({ type: ref.type as ReferencedTweet['type'], id: ref.id })
    }
  }

  let metrics: Obj = {}
  if (input.public_metrics !== undefined) {
    if (!isObj(input.public_metrics))
      throw new InvalidItemError(`Post ${id} public_metrics is not an object`)
    metrics = input.public_metrics
  }
  const impressions = metrics.impression_count
  if (
    impressions !== undefined &&
    (typeof impressions !== 'number' || !Number.isSafeInteger(impressions) || impressions < 0)
  ) {
    throw new InvalidItemError(`Post ${id} public_metrics.impression_count is not a count`)
  }
  if (input.lang !== undefined && typeof input.lang !== 'string') {
    throw new InvalidItemError(`Post ${id} lang is not a string`)
  }

  const raw: Obj = { ...input }
  for (const key of TWARC_FLAT_KEYS) delete raw[key]
  if (refs.length > 0) raw.referenced_tweets = refs
  const [rt, rc, lc, qc, bc] = METRICS.map((m) => metric(metrics, m))

  return {
    id,
    conversation_id: optionalId(input, 'conversation_id'),
    author_id: optionalId(input, 'author_id'),
    in_reply_to_user_id: optionalId(input, 'in_reply_to_user_id'),
    in_reply_to_post_id: refs.find((r) => r.type === 'replied_to')?.id ?? null,
    text: input.text,
    created_at: created,
    lang: typeof input.lang === 'string' ? input.lang : null,
    retweet_count: rt ?? null,
    reply_count: rc ?? null,
    like_count: lc ?? null,
    quote_count: qc ?? null,
    bookmark_count: bc ?? null,
    impression_count: typeof impressions === 'number' ? String(impressions) : null,
    refs,
    search_terms: searchTerms(raw),
    raw: raw as WirePost,
    observed_at: observedAt,
    included: false,
  }
}

/** Validates one user object. Throws InvalidItemError. */
export function toUserRow(input: unknown, observedAt: string, mayHoldNul = true): UserRow {
  if (!isObj(input)) throw new InvalidItemError('user is not an object')
  if (!isId(input.id))
    throw new InvalidItemError(`user id ${JSON.stringify(input.id)} is not 1-19 digits`)
  if (typeof input.username !== 'string' || typeof input.name !== 'string') {
    throw new InvalidItemError(`user ${input.id} has no name or username`)
  }
  if (mayHoldNul && hasNul(input)) {
    throw new InvalidItemError(`user ${input.id} contains a \\u0000 character`)
  }
  return {
    id: input.id,
    name: input.name,
    username: input.username,
    raw: input as WireUser,
    observed_at: observedAt,
  }
}

/** Keeps a raw line printable and storable: Postgres text refuses NUL bytes. */
function storableRaw(line: string): string {
  return line.includes('\u0000') ? line.replaceAll('\u0000', '\\u0000') : line
}

/**
 * Accumulates lines of any supported shape into rows:
 * - filtered-stream lines `{data: Post, includes, matching_rules}`;
 * - search, lookup and twarc2 pages `{data: Post[], includes, meta, errors?, __twarc?}`;
 * - single Posts, including twarc2's flattened ones (`author` inlined).
 * Later copies of the same Post or user replace earlier ones, and a Post seen as primary data is
 * preferred to the same Post seen only in `includes.tweets`.
 */
export class BatchNormalizer {
  private readonly posts = new Map<string, { row: PostRow; primary: boolean }>()
  private readonly users = new Map<string, UserRow>()
  private readonly rejects: Reject[] = []
  private empty = 0
  private mayHoldNul = true

  constructor(
    private readonly observedAt: string,
    private readonly options: NormalizeOptions = {},
  ) {}

  addLine(line: string): void {
    let parsed: unknown
    try {
      parsed = JSON.parse(line)
    } catch (err) {
      this.reject(`not JSON: ${(err as Error).message}`, line)
      return
    }
    // A NUL can only come from a \u0000 escape (JSON forbids raw control characters), so lines
    // without one need no deep scan of their objects.
    this.mayHoldNul = line.includes('\\u0000')
    try {
      this.addObject(parsed, line)
    } finally {
      this.mayHoldNul = true
    }
  }

  addObject(value: unknown, line: string = JSON.stringify(value)): void {
    if (!isObj(value)) {
      this.reject('not a Post, stream line or response page', line)
      return
    }
    if ('data' in value) {
      const data = value.data
      const list = Array.isArray(data) ? data : isObj(data) ? [data] : undefined
      if (!list) {
        this.reject('data is neither a Post nor a list of Posts', line)
        return
      }
      if (list.length === 0) this.empty += 1
      const single = list.length === 1
      for (const post of list as unknown[]) {
        this.addPost(post, true, single ? line : JSON.stringify(post))
      }
      this.addIncludes(value.includes, line)
      return
    }
    if ('id' in value && 'text' in value) {
      this.addPost(value, true, line)
      if (value.author !== undefined) this.addUser(value.author, line)
      if (Array.isArray(value.referenced_tweets)) {
        for (const ref of value.referenced_tweets) {
          if (isObj(ref) && typeof ref.text === 'string') {
            const { type: _type, ...post } = ref
            this.addPost(post, false, line)
            if (ref.author !== undefined) this.addUser(ref.author, line)
          }
        }
      }
      return
    }
    if ('errors' in value || Object.keys(value).length === 0) {
      this.empty += 1
      return
    }
    this.reject('not a Post, stream line or response page', line)
  }

  private addIncludes(includes: unknown, line: string): void {
    if (includes === undefined) return
    if (!isObj(includes)) {
      this.reject('includes is not an object', line)
      return
    }
    const { users, tweets } = includes
    if (Array.isArray(users)) for (const u of users as unknown[]) this.addUser(u, line)
    if (Array.isArray(tweets)) for (const t of tweets as unknown[]) this.addPost(t, false, line)
  }

  private addPost(post: unknown, primary: boolean, line: string): void {
    const skip = this.options.skipIncluded
    if (!primary && skip && isObj(post) && isId(post.id) && skip(post.id)) return
    try {
      const row = toPostRow(post, this.observedAt, this.mayHoldNul)
      const seen = this.posts.get(row.id)
      if (seen && seen.primary && !primary) return
      this.posts.set(row.id, { row, primary })
    } catch (err) {
      if (!(err instanceof InvalidItemError)) throw err
      this.reject(err.message, line)
    }
  }

  private addUser(user: unknown, line: string): void {
    try {
      const row = toUserRow(user, this.observedAt, this.mayHoldNul)
      this.users.set(row.id, row)
    } catch (err) {
      if (!(err instanceof InvalidItemError)) throw err
      this.reject(err.message, line)
    }
  }

  private reject(reason: string, line: string): void {
    this.rejects.push({ reason, raw: storableRaw(line) })
  }

  result(): NormalizedBatch {
    return {
      posts: [...this.posts.values()].map((p) =>
        p.primary ? p.row : { ...p.row, included: true },
      ),
      users: [...this.users.values()],
      rejects: this.rejects,
      empty: this.empty,
    }
  }
}

export interface NormalizeOptions {
  /**
   * Included copies (`includes.tweets`, a twarc2 Post's referenced Posts) of these ids are left
   * out before they are validated or tokenized: the writer passes the Posts it stored within the
   * refresh period, whose copies its statement would skip anyway. Primary Posts are never skipped.
   */
  skipIncluded?: (id: string) => boolean
}

/** Normalizes a batch of raw upstream lines (see BatchNormalizer). */
export function normalizeLines(
  lines: readonly string[],
  observedAt: string,
  options: NormalizeOptions = {},
): NormalizedBatch {
  const normalizer = new BatchNormalizer(observedAt, options)
  for (const line of lines) normalizer.addLine(line)
  return normalizer.result()
}
