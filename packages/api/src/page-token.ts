import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Opaque pagination tokens: a position (an id, or a time for counts) and an HMAC over it and the
 * request it belongs to. A token altered by hand, or replayed with another query, fails the check.
 */
export function createPageTokens(secret: string) {
  const mac = (scope: string, position: string) =>
    createHmac('sha256', secret)
      .update(scope)
      .update('\n')
      .update(position)
      .digest()
      .subarray(0, 12)
  return {
    encode(scope: string, position: string): string {
      return `${Buffer.from(position, 'utf8').toString('base64url')}.${mac(scope, position).toString('base64url')}`
    },
    /** The position, or undefined when the token is not one of ours for this scope. */
    decode(scope: string, token: string): string | undefined {
      if (token.length > 200) return undefined
      const dot = token.indexOf('.')
      if (dot < 1) return undefined
      const position = Buffer.from(token.slice(0, dot), 'base64url').toString('utf8')
      const given = Buffer.from(token.slice(dot + 1), 'base64url')
      const expected = mac(scope, position)
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) return undefined
      return position
    },
  }
}

export type PageTokens = ReturnType<typeof createPageTokens>
