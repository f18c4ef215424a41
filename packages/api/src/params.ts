import { isId, parseTime } from '@threadline/domain'
import { InvalidRequestError, type InvalidParameter } from './errors.js'

/**
 * A small declarative validator for query parameters, producing X's messages (docs/api.md §1.2). One
 * spec per endpoint; every failed check becomes one `errors` item, all reported together.
 */
export type ParamSpec = (
  | { kind: 'id' }
  | { kind: 'ids'; min: number; max: number }
  | { kind: 'int'; min: number; max: number }
  | { kind: 'enum'; values: readonly string[] }
  | { kind: 'list'; values: readonly string[] }
  | { kind: 'string' }
  | { kind: 'time' }
  | { kind: 'bool' }
) & {
  required?: boolean
  /** Another name for the same parameter (`post.fields` for `tweet.fields`): values are merged. */
  aliasOf?: string
  description?: string
}

export type EndpointParams = Readonly<Record<string, ParamSpec>>

export type ParamValue = string | string[] | number | boolean | Date
export type ParsedParams = Record<string, ParamValue | undefined>

const ID_PATTERN_TEXT = '^[0-9]{1,19}$'

/** The query string of a raw URL as a multimap; `+` is a space, `%2C` and `,` both separate lists. */
export function queryEntries(url: string): Array<[string, string]> {
  const q = url.indexOf('?')
  if (q < 0) return []
  return [...new URLSearchParams(url.slice(q + 1))]
}

function checkOne(
  name: string,
  spec: ParamSpec,
  raw: string,
  errors: InvalidParameter[],
): ParamValue | undefined {
  const fail = (message: string) => {
    errors.push({ parameters: { [name]: [raw] }, message })
    return undefined
  }
  if (raw === '') return fail(`The \`${name}\` query parameter can not be empty`)
  // Postgres refuses NUL in text: refused here, where every parameter passes.
  if (raw.includes('\u0000')) {
    return fail(`The \`${name}\` query parameter value holds a NUL character, which is not allowed`)
  }
  switch (spec.kind) {
    case 'id':
      return isId(raw)
        ? raw
        : fail(`The \`${name}\` query parameter value [${raw}] does not match ${ID_PATTERN_TEXT}`)
    case 'ids': {
      const items = raw.split(',').filter((v) => v !== '')
      if (items.length < spec.min || items.length > spec.max) {
        return fail(
          `The number of values in the \`${name}\` query parameter list [${items.length}] is not between ${spec.min} and ${spec.max}`,
        )
      }
      let ok = true
      for (const item of items) {
        if (!isId(item)) {
          ok = false
          fail(`The \`${name}\` query parameter value [${item}] does not match ${ID_PATTERN_TEXT}`)
        }
      }
      return ok ? items : undefined
    }
    case 'int': {
      if (!/^-?\d{1,15}$/.test(raw)) {
        return fail(`The \`${name}\` query parameter value [${raw}] is not a valid integer`)
      }
      const n = Number(raw)
      return n >= spec.min && n <= spec.max
        ? n
        : fail(
            `The \`${name}\` query parameter value [${raw}] is not between ${spec.min} and ${spec.max}`,
          )
    }
    case 'enum':
      return spec.values.includes(raw)
        ? raw
        : fail(
            `The \`${name}\` query parameter value [${raw}] is not one of [${spec.values.join(',')}]`,
          )
    case 'list': {
      const items = raw.split(',').filter((v) => v !== '')
      if (items.length === 0) return fail(`The \`${name}\` query parameter can not be empty`)
      let ok = true
      for (const item of items) {
        if (!spec.values.includes(item)) {
          ok = false
          fail(
            `The \`${name}\` query parameter value [${item}] is not one of [${spec.values.join(',')}]`,
          )
        }
      }
      return ok ? items : undefined
    }
    case 'string':
      return raw
    case 'time': {
      const date = parseTime(raw)
      return (
        date ??
        fail(`The \`${name}\` query parameter value [${raw}] is not a valid RFC3339 date-time`)
      )
    }
    case 'bool': {
      const lower = raw.toLowerCase()
      if (lower === 'true') return true
      if (lower === 'false') return false
      return fail(`The \`${name}\` query parameter value [${raw}] is not one of [true,false]`)
    }
  }
}

/**
 * Validates a request's query parameters (and path parameters, passed in `path`) against an
 * endpoint's spec. Throws InvalidRequestError listing every failure; returns values by canonical
 * name (aliases folded into the name they stand for).
 */
export function parseParams(
  spec: EndpointParams,
  entries: ReadonlyArray<readonly [string, string]>,
  path: Readonly<Record<string, string>> = {},
): ParsedParams {
  const errors: InvalidParameter[] = []
  const out: ParsedParams = {}
  const grouped = new Map<string, string[]>()
  for (const [name, value] of entries) {
    const list = grouped.get(name)
    if (list) list.push(value)
    else grouped.set(name, [value])
  }
  const known = Object.keys(spec).filter((n) => !(n in path))
  for (const [name, values] of grouped) {
    const s = spec[name]
    if (!s || name in path) {
      errors.push({
        parameters: { [name]: values },
        message: `The query parameter [${name}] is not one of [${known.join(',')}]`,
      })
      continue
    }
    if (values.length > 1) {
      errors.push({
        parameters: { [name]: values },
        message: `Duplicate parameters are not allowed: the \`${name}\` query parameter`,
      })
      continue
    }
    const value = checkOne(name, s, values[0]!, errors)
    if (value === undefined) continue
    const key = s.aliasOf ?? name
    const prior = out[key]
    // `tweet.fields` and `post.fields` together: the union of both lists.
    out[key] =
      Array.isArray(prior) && Array.isArray(value) ? [...new Set([...prior, ...value])] : value
  }
  for (const [name, value] of Object.entries(path)) {
    const s = spec[name]
    if (!s) continue
    const parsed = checkOne(name, s, value, errors)
    if (parsed !== undefined) out[name] = parsed
  }
  for (const [name, s] of Object.entries(spec)) {
    if (s.required && !grouped.has(name) && !(name in path)) {
      errors.push({
        parameters: { [name]: [] },
        message: `The \`${name}\` query parameter can not be empty`,
      })
    }
  }
  if (errors.length > 0) throw new InvalidRequestError(errors)
  return out
}
