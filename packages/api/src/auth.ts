import { findAppsByTokens, type Db } from '@threadline/db'
import { serviceUnavailable, tooManyRequests, unauthorized, type ApiError } from './errors.js'
import {
  createTokenLookups,
  TokenLookupsBusyError,
  type TokenLookupStats,
} from './token-lookups.js'
import type { AuthedApp } from './types.js'

/** Known tokens kept; past this the oldest is dropped (never the whole cache). */
const KNOWN_TOKENS = 10_000
/** Unknown tokens remembered, apart from the known ones so that garbage cannot push them out. */
const UNKNOWN_TOKENS = 10_000
/** How long an unknown token stays unknown: tokens are random, so none becomes valid later. */
const UNKNOWN_TOKEN_MS = 5 * 60_000
/** Requests without a valid token one client address may send per window before it gets 429s. */
const UNAUTHENTICATED_PER_WINDOW = 300
const UNAUTHENTICATED_WINDOW_MS = 60_000
/** Addresses counted at once; a flood from more addresses than this only forgets the oldest. */
const ADDRESSES = 10_000
/** The shape of every token Threadline issues (createApp: 32 random bytes, base64url). */
const TOKEN_SHAPE = /^[A-Za-z0-9_-]{43}$/
/** A map that keeps its newest `max` entries (Map iterates in insertion order). */
class Bounded<V> {
  private readonly map = new Map<string, V>()
  constructor(private readonly max: number) {}
  get(key: string): V | undefined {
    return this.map.get(key)
  }
  set(key: string, value: V) {
    this.map.delete(key)
    this.map.set(key, value)
    if (this.map.size > this.max) this.map.delete(this.map.keys().next().value!)
  }
  delete(key: string) {
    this.map.delete(key)
  }
}

export type AuthResult = { app: AuthedApp } | { refused: ApiError }

export interface Authenticator {
  (header: string | undefined, address: string): Promise<AuthResult>
  /** Token lookups made so far (for the `threadline_api_token_lookups_total` metric). */
  stats(): TokenLookupStats
}

/**
 * Bearer-token authentication (docs/api.md §1.1). Lookups are cached both ways, so a hot client
 * and a repeated bad token each cost no query. A token of the wrong shape is refused without one.
 * A well-formed token not seen before is always looked up, whatever its address sent before (it
 * may be valid), through batched lookups whose queries per second are bounded; only requests
 * that cannot be valid count against their address, which past its budget gets 429s for them.
 */
export function createAuthenticator(
  db: Db,
  cacheMs: number,
  options: { lookupsPerSecond?: number } = {},
): Authenticator {
  const known = new Bounded<{ app: AuthedApp; expires: number }>(KNOWN_TOKENS)
  const unknown = new Bounded<number>(UNKNOWN_TOKENS)
  const failures = new Bounded<{ count: number; windowEnds: number }>(ADDRESSES)
  const lookups = createTokenLookups((tokens) => findAppsByTokens(db, tokens), {
    queriesPerSecond: options.lookupsPerSecond,
  })

  /** Counts a request that cannot be valid: 401, or 429 once the address is past its budget. */
  const refuse = (address: string, now: number): AuthResult => {
    let entry = failures.get(address)
    if (!entry || entry.windowEnds <= now) {
      entry = { count: 0, windowEnds: now + UNAUTHENTICATED_WINDOW_MS }
      failures.set(address, entry)
    }
    entry.count++
    return {
      refused: entry.count > UNAUTHENTICATED_PER_WINDOW ? tooManyRequests() : unauthorized(),
    }
  }

  const authenticate = async (header: string | undefined, address: string): Promise<AuthResult> => {
    const now = Date.now()
    const token = header ? /^Bearer +(\S{1,512})\s*$/i.exec(header)?.[1] : undefined
    if (token === undefined || !TOKEN_SHAPE.test(token)) return refuse(address, now)
    const hit = known.get(token)
    if (hit && hit.expires > now) return { app: hit.app }
    if ((unknown.get(token) ?? 0) > now) return refuse(address, now)
    let app: AuthedApp | undefined
    try {
      app = await lookups.lookup(token)
    } catch (err) {
      if (err instanceof TokenLookupsBusyError) return { refused: serviceUnavailable() }
      throw err
    }
    if (!app) {
      unknown.set(token, Date.now() + Math.max(cacheMs, UNKNOWN_TOKEN_MS))
      return refuse(address, now)
    }
    unknown.delete(token)
    known.set(token, { app, expires: Date.now() + cacheMs })
    return { app }
  }
  return Object.assign(authenticate, { stats: lookups.stats })
}
