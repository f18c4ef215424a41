import type { CountBucket } from '@threadline/db'
import {
  assembleIncludes,
  notAuthorized,
  notFound,
  primaryFields,
  shapePost,
  type FieldSelection,
  type Includes,
  type ResourceNotFound,
  type ResourceUnauthorized,
  type StoredPost,
} from '@threadline/domain'
import type { Ruled } from './rules.js'

/** A page of Posts in X's shape: each Post as JSON text, `includes` and `errors` as values. */
export interface PostsPage {
  data: string[]
  includes?: Includes
  errors: Array<ResourceNotFound | ResourceUnauthorized>
}

export interface PresentOptions {
  /** The parameter that named the skeleton's ids (`ids`, `id`): unknown ones become its errors. */
  notFoundAs?: string
  /** The tree's place of each Post, appended to it as `thread`. */
  thread?: (id: string) => object
}

/**
 * X's shape for what the rules let through (pure): the Posts in skeleton order, one `includes`
 * for the page, and `errors` naming the unknown ids first, then the expansions' missing targets.
 */
export function present(
  ruled: Ruled,
  sel: FieldSelection,
  options: PresentOptions = {},
): PostsPage {
  const fields = primaryFields(sel)
  const data: string[] = []
  const stored: StoredPost[] = []
  for (const item of ruled.shown) {
    let json: string
    if ('placeholder' in item) json = `{"id":"${item.id}"}`
    else {
      json = item.json ?? JSON.stringify(shapePost(item.post, fields))
      if (item.post) stored.push(item.post)
    }
    if (options.thread) {
      const thread = options.thread(item.id)
      const placed = 'placeholder' in item ? { ...thread, withdrawn: item.placeholder } : thread
      json = withMember(json, 'thread', JSON.stringify(placed))
    }
    data.push(json)
  }
  const named = options.notFoundAs
  const errors: PostsPage['errors'] =
    named === undefined
      ? []
      : [
          ...ruled.unknown.map((id) => notFound('tweet', named, id)),
          ...(ruled.denied ?? []).map((id) => notAuthorized(named, id)),
        ]
  if (!ruled.targets || stored.length === 0) return { data, errors }
  const resolved = assembleIncludes(stored, sel, ruled.targets)
  return { data, includes: resolved.includes, errors: [...errors, ...resolved.errors] }
}

/**
 * A stream's messages (pure): each Post as its own `{data, includes?, errors?}` text, by id.
 * Without targets (they could not be read) a message is the Post alone.
 */
export function presentEach(ruled: Ruled, sel: FieldSelection): Map<string, string> {
  const out = new Map<string, string>()
  for (const item of ruled.shown) {
    if ('placeholder' in item) continue
    const page = present({ shown: [item], unknown: [], targets: ruled.targets }, sel)
    out.set(item.id, pageJson(page, { one: true }))
  }
  return out
}

/**
 * A response body from a page: `data` (one Post with `one`), `includes`, `errors`, then `meta`;
 * empty members left out (docs/api.md §1: never null, never []). The Posts are spliced in as the
 * text they are, never parsed and serialized again.
 */
export function pageJson(page: PostsPage, extra: { meta?: object; one?: boolean } = {}): string {
  return jsonObject([
    ['data', extra.one ? page.data[0] : jsonArray(page.data)],
    ['includes', page.includes && JSON.stringify(page.includes)],
    ['errors', jsonOf(page.errors)],
    ['meta', extra.meta && JSON.stringify(extra.meta)],
  ])
}

/** A counts page (its buckets' times come formatted from Postgres): hundreds of them, as text. */
export function countsJson(buckets: readonly CountBucket[], meta: object): string {
  const data = buckets.map(
    (b) => `{"end":"${b.end}","start":"${b.start}","tweet_count":${b.tweet_count}}`,
  )
  return jsonObject([
    ['data', jsonArray(data)],
    ['meta', JSON.stringify(meta)],
  ])
}

/**
 * A filtered-stream line: the message with the app's `matching_rules` (JSON text) appended, so a
 * message shaped once serves every app; a conversation feed's line (no rules) is the message.
 */
export function streamLine(message: string, matchingRules: string | undefined): string {
  return matchingRules ? withMember(message, 'matching_rules', matchingRules) : message
}

/** `object` (JSON text of an object) with one more member, `value` being JSON text too. */
function withMember(object: string, key: string, value: string): string {
  return `${object.slice(0, -1)},"${key}":${value}}`
}

function jsonObject(members: Array<[string, string | undefined]>): string {
  const parts: string[] = []
  for (const [key, value] of members) if (value !== undefined) parts.push(`"${key}":${value}`)
  return `{${parts.join(',')}}`
}

const jsonArray = (items: readonly string[]): string | undefined =>
  items.length === 0 ? undefined : `[${items.join(',')}]`

const jsonOf = (value: readonly unknown[]): string | undefined =>
  value.length === 0 ? undefined : JSON.stringify(value)
