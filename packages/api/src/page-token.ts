import { createHmac, timingSafeEqual } from 'node:crypto'

/**
 * Opaque pagination tokens: a position (an id, or a time for counts) and an HMAC over it and the
 * request it belongs to. A token altered by hand, or replayed with another query, fails the check.
 * `previous` (the secret before a rotation) still verifies, so tokens already handed out keep
 * working; new tokens are signed with `secret` only.
 */
export function createPageTokens(secret: string, previous?: string) {
  const macWith = (key: string, scope: string, position: string) =>
    createHmac('sha256', key).update(scope).update('\n').update(position).digest().subarray(0, 12)
  const mac = (scope: string, position: string) => macWith(secret, scope, position)
  const matches = (given: Buffer, expected: Buffer) =>
    given.length === expected.length && timingSafeEqual(given, expected)
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
      if (matches(given, mac(scope, position))) return position
      if (previous !== undefined && matches(given, macWith(previous, scope, position))) {
        return position
      }
      return undefined
    },
  }
}

export type PageTokens = ReturnType<typeof createPageTokens>
