/** X's parameter lists (OpenAPI 2.159) and request validation with X's 400 bodies. */
import { TWEET_EXPANSIONS, TWEET_FIELDS, USER_FIELDS } from '@threadline/domain'

// X's lists (OpenAPI 2.159) live in one place, the domain package.
export { TWEET_FIELDS, USER_FIELDS, TWEET_EXPANSIONS as EXPANSIONS } from '@threadline/domain'

export const FIELD_PARAMS = [
  'tweet.fields',
  'post.fields',
  'expansions',
  'user.fields',
  'media.fields',
  'poll.fields',
  'place.fields',
]

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
