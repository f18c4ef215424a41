import { conversationIdOf, parseQuery } from '@threadline/query'

const MAX_ID = 9_223_372_036_854_775_807n

/**
 * The conversation a rule value follows, when the value is exactly one `conversation_id:<id>`
 * term: only those rules are backfilled. The query package decides; the regex is the fallback
 * while its parser is being written, and agrees with it on this one form.
 */
export function conversationIdOfRule(value: string): string | undefined {
  try {
    const parsed = parseQuery(value)
    if (parsed.ok) {
      const id = conversationIdOf(parsed.ast)
      if (id !== undefined) return id
    }
  } catch {
    // fall through to the plain form
  }
  const m = /^\s*conversation_id:(\d{1,19})\s*$/.exec(value)
  if (!m || BigInt(m[1]!) > MAX_ID) return undefined
  return BigInt(m[1]!).toString() // canonical: no leading zeros
}
