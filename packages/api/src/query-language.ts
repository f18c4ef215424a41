import { compileSql, conversationIdOf, parseQuery } from '@threadline/query'
import type { PostCondition } from '@threadline/db'
import { invalidRequest } from './errors.js'

/**
 * Parses a search or counts query into a SQL condition, or throws X's query-syntax 400. `prepared`
 * says whether its statements may be prepared (see SearchWindow.prepared in @threadline/db): only
 * for one conversation, whose plan is the same whatever the id.
 */
export function compileQuery(
  raw: string,
  maxLength: number,
): { condition: PostCondition; prepared: boolean } {
  const parsed = parseQuery(raw, { maxLength })
  if (!parsed.ok) {
    throw invalidRequest(
      'query',
      [raw],
      `There were errors processing your request: ${parsed.errors.join(', ')}`,
    )
  }
  return {
    condition: compileSql(parsed.ast) as PostCondition,
    prepared: conversationIdOf(parsed.ast) !== undefined,
  }
}

/** The parser's reasons for refusing a rule value, or an empty list when it parses. */
export function ruleValueErrors(value: string, maxLength: number): string[] {
  const parsed = parseQuery(value, { maxLength })
  return parsed.ok ? [] : parsed.errors
}
