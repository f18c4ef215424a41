import { describe, expect, expectTypeOf, it } from 'vitest'
import { InvalidRequestError } from './errors.js'
import { parseParams, queryEntries } from './params.js'
import { RULES_POST_PARAMS } from './specs.js'
import { COUNTS_PARAMS } from './tweets/counts/spec.js'
import { LOOKUP_PARAMS } from './tweets/lookup/spec.js'
import { SEARCH_RECENT_PARAMS } from './tweets/search/spec.js'

const parse = (spec: Parameters<typeof parseParams>[0], qs: string) =>
  parseParams(spec, queryEntries(`/x?${qs}`))
const messages = (fn: () => unknown) => {
  try {
    fn()
  } catch (err) {
    if (err instanceof InvalidRequestError) return err.errors.map((e) => e.message)
    throw err
  }
  return []
}

describe('parseParams', () => {
  it('types its result by the spec: required present, aliases folded, enums literal', () => {
    const p = parseParams(COUNTS_PARAMS, queryEntries('/x?query=a&granularity=day'))
    expectTypeOf(p.query).toEqualTypeOf<string>()
    expectTypeOf(p.granularity).toEqualTypeOf<'minute' | 'hour' | 'day' | undefined>()
    expectTypeOf(p.start_time).toEqualTypeOf<Date | undefined>()
    const l = parseParams(LOOKUP_PARAMS, queryEntries('/x?ids=1'))
    expectTypeOf(l.ids).toEqualTypeOf<string[]>()
    expectTypeOf(l).not.toHaveProperty('post.fields')
    expect(p.granularity).toBe('day')
  })

  it('parses lists, aliases and numbers', () => {
    const p = parse(LOOKUP_PARAMS, 'ids=1%2C2,3&tweet.fields=lang&post.fields=lang,author_id')
    expect(p.ids).toEqual(['1', '2', '3'])
    expect(p['tweet.fields']).toEqual(['lang', 'author_id'])
    expect(parse(SEARCH_RECENT_PARAMS, 'query=a+b&max_results=50')).toMatchObject({
      query: 'a b',
      max_results: 50,
    })
  })

  it('booleans in any case', () => {
    expect(parse(RULES_POST_PARAMS, 'dry_run=True&delete_all=FALSE')).toEqual({
      dry_run: true,
      delete_all: false,
    })
  })

  it('X messages', () => {
    expect(messages(() => parse(SEARCH_RECENT_PARAMS, 'query=x&max_results=abc'))).toEqual([
      'The `max_results` query parameter value [abc] is not a valid integer',
    ])
    expect(messages(() => parse(SEARCH_RECENT_PARAMS, 'query=x&start_time=yesterday'))).toEqual([
      'The `start_time` query parameter value [yesterday] is not a valid RFC3339 date-time',
    ])
    expect(messages(() => parse(SEARCH_RECENT_PARAMS, 'query=x&query=y'))).toEqual([
      'Duplicate parameters are not allowed: the `query` query parameter',
    ])
  })
})
