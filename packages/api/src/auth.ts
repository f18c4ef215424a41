import { findAppByToken, type Db } from '@threadline/db'
import type { AuthedApp } from './types.js'

/** Known tokens kept; past this the oldest is dropped (never the whole cache). */
const KNOWN_TOKENS = 10_000
/** Unknown tokens remembered, apart from the known ones so that garbage cannot push them out. */
const UNKNOWN_TOKENS = 10_000
/** Requests without a valid token one client address may send per window before it gets 429s. */
const UNAUTHENTICATED_PER_WINDOW = 300
const UNAUTHENTICATED_WINDOW_MS = 60_000
/** Addresses counted at once; a flood from more addresses than this only forgets the oldest. */
const ADDRESSES = 10_000

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

export type AuthResult = { app: AuthedApp } | { unknown: true } | { limited: true }

/**
 * Bearer-token authentication (docs/api.md §1.1). Lookups are cached both ways for `cacheMs`, so a
 * hot client and a repeated bad token each cost no query; an address that keeps sending requests
 * without a valid token is answered 429 without a lookup until its window ends.
 */
export function createAuthenticator(db: Db, cacheMs: number) {
  const known = new Bounded<{ app: AuthedApp; expires: number }>(KNOWN_TOKENS)
  const unknown = new Bounded<number>(UNKNOWN_TOKENS)
  const failures = new Bounded<{ count: number; windowEnds: number }>(ADDRESSES)

  /** Counts a request without a valid token; true when the address is past its budget. */
  const overBudget = (address: string, now: number, count: boolean): boolean => {
    let entry = failures.get(address)
    if (!entry || entry.windowEnds <= now) {
      entry = { count: 0, windowEnds: now + UNAUTHENTICATED_WINDOW_MS }
      failures.set(address, entry)
    }
    if (count) entry.count++
    return entry.count > UNAUTHENTICATED_PER_WINDOW
  }

  return async function authenticate(
    header: string | undefined,
    address: string,
  ): Promise<AuthResult> {
    const now = Date.now()
    const hit = header === undefined ? undefined : known.get(header)
    if (hit && hit.expires > now) return { app: hit.app }
    // A token known before is looked up again whatever its address sent: garbage from a shared
    // address cannot lock a real client out.
    if (!hit && overBudget(address, now, false)) return { limited: true }
    const m = header ? /^Bearer +(\S{1,512})\s*$/i.exec(header) : null
    const cachedUnknown = header === undefined ? undefined : unknown.get(header)
    if (!m || (cachedUnknown !== undefined && cachedUnknown > now)) {
      overBudget(address, now, true)
      return { unknown: true }
    }
    const app = await findAppByToken(db, m[1]!)
    if (!app) {
      unknown.set(header!, Date.now() + cacheMs)
      overBudget(address, now, true)
      return { unknown: true }
    }
    unknown.delete(header!)
    known.set(header!, { app, expires: Date.now() + cacheMs })
    return { app }
  }
}
