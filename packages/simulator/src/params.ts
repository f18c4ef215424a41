/** X's parameter lists (OpenAPI 2.159) and request validation with X's 400 bodies. */
import { parseTime, TWEET_EXPANSIONS, TWEET_FIELDS, USER_FIELDS } from '@threadline/domain'

// X's lists (OpenAPI 2.159) live in one place, the domain package.
export { TWEET_FIELDS, USER_FIELDS, TWEET_EXPANSIONS as EXPANSIONS } from '@threadline/domain'

const ENUMS: Record<string, readonly string[]> = {
  'tweet.fields': TWEET_FIELDS,
  'post.fields': TWEET_FIELDS,
  'user.fields': USER_FIELDS,
  expansions: TWEET_EXPANSIONS,
}

export interface ParamError {
  parameters: Record<string, string[]>
  message: string
}

/** A request that fails X's checks; the handler answers 400 with these errors. */
export class InvalidRequestError extends Error {
  override name = 'InvalidRequestError'
  constructor(readonly errors: ParamError[]) {
    super(errors.map((e) => e.message).join('; '))
  }
}

export function invalid(name: string, raw: string, message: string): InvalidRequestError {
  return new InvalidRequestError([{ parameters: { [name]: [raw] }, message }])
}

/**
 * Reads the query string: unknown and duplicate parameters and unknown enum values are errors, as on
 * X. Returns single values by name.
 */
export function readParams(search: URLSearchParams, allowed: string[]): Map<string, string> {
  const out = new Map<string, string>()
  const errors: ParamError[] = []
  for (const [name, value] of search) {
    if (!allowed.includes(name)) {
      errors.push({
        parameters: { [name]: [value] },
        message: `The query parameter [${name}] is not one of [${allowed.join(',')}]`,
      })
      continue
    }
    if (out.has(name)) {
      errors.push({
        parameters: { [name]: search.getAll(name) },
        message: `Duplicate parameters are not allowed: the \`${name}\` query parameter`,
      })
      continue
    }
    out.set(name, value)
    const allowedValues = ENUMS[name]
    if (allowedValues) {
      for (const v of value.split(',')) {
        if (!allowedValues.includes(v)) {
          errors.push({
            parameters: { [name]: [value] },
            message: `The \`${name}\` query parameter value [${v}] is not one of [${allowedValues.join(',')}]`,
          })
        }
      }
    }
  }
  if (errors.length > 0) throw new InvalidRequestError(errors)
  return out
}

export function intParam(
  params: Map<string, string>,
  name: string,
  fallback: number,
  min: number,
  max: number,
): number {
  const raw = params.get(name)
  if (raw === undefined) return fallback
  const n = /^-?\d+$/.test(raw) ? Number(raw) : NaN
  if (!(n >= min && n <= max)) {
    throw invalid(
      name,
      raw,
      `The \`${name}\` query parameter value [${raw}] is not between ${min} and ${max}`,
    )
  }
  return n
}

const ID = /^[0-9]{1,19}$/

export function idParam(params: Map<string, string>, name: string): string | undefined {
  const raw = params.get(name)
  if (raw === undefined) return undefined
  if (!ID.test(raw)) {
    throw invalid(
      name,
      raw,
      `The \`${name}\` query parameter value [${raw}] does not match ^[0-9]{1,19}$`,
    )
  }
  return raw
}

export function idListParam(params: Map<string, string>, name: string, max: number): string[] {
  const raw = params.get(name)
  if (raw === undefined || raw === '') {
    throw invalid(name, raw ?? '', `The \`${name}\` query parameter can not be empty`)
  }
  const ids = raw.split(',')
  if (ids.length > max) {
    throw invalid(
      name,
      raw,
      `The number of values in the \`${name}\` query parameter list [${ids.length}] is not between 1 and ${max}`,
    )
  }
  const bad = ids.filter((id) => !ID.test(id))
  if (bad.length > 0) {
    throw invalid(
      name,
      raw,
      `The \`${name}\` query parameter value [${bad[0]}] does not match ^[0-9]{1,19}$`,
    )
  }
  return [...new Set(ids)]
}

export function boolParam(params: Map<string, string>, name: string): boolean {
  const raw = params.get(name)
  if (raw === undefined) return false
  const v = raw.toLowerCase()
  if (v === 'true') return true
  if (v === 'false') return false
  throw invalid(
    name,
    raw,
    `The \`${name}\` query parameter value [${raw}] is not one of [true,false]`,
  )
}

/** One parameter's check: its value from the query string, or X's 400 when it is wrong. */
export type Reader<T> = (params: Map<string, string>, name: string) => T

/** A route's parameters, in X's order (the order its "not one of" message lists them). */
export type ParamsSpec = Readonly<Record<string, Reader<unknown>>>

/** What a spec reads to: each parameter typed by its reader. */
export type ParamsOf<S extends ParamsSpec> = { [K in keyof S]: ReturnType<S[K]> }

/** Taken as written. */
export const text: Reader<string | undefined> = (params, name) => params.get(name)

/** Required and not blank. */
export const requiredText: Reader<string> = (params, name) => {
  const raw = params.get(name)
  if (raw === undefined || raw.trim() === '') {
    throw invalid(name, raw ?? '', `The \`${name}\` query parameter can not be empty`)
  }
  return raw
}

export const int =
  (fallback: number, min: number, max: number): Reader<number> =>
  (params, name) =>
    intParam(params, name, fallback, min, max)

export const id: Reader<string | undefined> = idParam

export const idList =
  (max: number): Reader<string[]> =>
  (params, name) =>
    idListParam(params, name, max)

export const optionalIdList =
  (max: number): Reader<string[] | undefined> =>
  (params, name) =>
    params.has(name) ? idListParam(params, name, max) : undefined

export const bool: Reader<boolean> = boolParam

/** An RFC 3339 time: epoch milliseconds, and the text as written (X's messages echo it). */
export const time: Reader<{ ms: number; raw: string } | undefined> = (params, name) => {
  const raw = params.get(name)
  if (raw === undefined) return undefined
  const t = parseTime(raw)
  if (!t) {
    throw invalid(name, raw, `Invalid '${name}':'${raw}'. '${name}' must be a valid RFC 3339 time`)
  }
  return { ms: t.getTime(), raw }
}

/** The field and expansion parameters of a Post-returning route. */
export const FIELD_PARAMS = {
  'tweet.fields': text,
  'post.fields': text,
  expansions: text,
  'user.fields': text,
  'media.fields': text,
  'poll.fields': text,
  'place.fields': text,
} as const satisfies ParamsSpec

/** Checks the query string against a spec: unknown or duplicate names first, then each value. */
export function parseQuery<S extends ParamsSpec>(search: URLSearchParams, spec: S): ParamsOf<S> {
  const raw = readParams(search, Object.keys(spec))
  const out: Record<string, unknown> = {}
  for (const [name, read] of Object.entries(spec)) out[name] = read(raw, name)
  // @NOTE The one place the spec's type meets the values: each came from its own reader.
  return out as ParamsOf<S>
}
