import { compileSql, parseQuery } from '@threadline/query'
import type { PostCondition } from '@threadline/db'
import { invalidRequest } from './errors.js'

/** Parses a search or counts query into a SQL condition, or throws X's query-syntax 400. */
export function compileQuery(raw: string, maxLength: number): PostCondition {
  const parsed = parseQuery(raw, { maxLength })
  if (!parsed.ok) {
    throw invalidRequest(
      'query',
      [raw],
      `There were errors processing your request: ${parsed.errors.join(', ')}`,
    )
  }
  return compileSql(parsed.ast) as PostCondition
}

/** The parser's reasons for refusing a rule value, or an empty list when it parses. */
export function ruleValueErrors(value: string, maxLength: number): string[] {
  const parsed = parseQuery(value, { maxLength })
  return parsed.ok ? [] : parsed.errors
}
