/**
 * The viewer's calls to the public API (docs/api.md §6): same origin only, the bearer token in the
 * Authorization header only. The token comes from the URL fragment (`#token=…`, removed from the
 * address bar at once) or from a prompt, and is kept in this tab's session storage.
 */

import type { Page, Post, User } from './wire.js'

export type { Page, Post, User }

const TOKEN_KEY = 'threadline.token'

export class UnauthorizedError extends Error {
  constructor() {
    super('the token was refused')
    this.name = 'UnauthorizedError'
  }
}

/** Takes `#token=…` from the address (and removes it), else the token kept for this tab. */
export function currentToken(): string | undefined {
  const fragment = new URLSearchParams(location.hash.slice(1))
  const given = fragment.get('token')
  if (given) {
    sessionStorage.setItem(TOKEN_KEY, given)
    fragment.delete('token')
    const rest = fragment.toString()
    history.replaceState(
      history.state,
      '',
      `${location.pathname}${location.search}${rest ? `#${rest}` : ''}`,
    )
  }
  return sessionStorage.getItem(TOKEN_KEY) ?? undefined
}

export function saveToken(token: string): void {
  sessionStorage.setItem(TOKEN_KEY, token)
}

export function forgetToken(): void {
  sessionStorage.removeItem(TOKEN_KEY)
}

/** A same-origin path with its query (never the token: that goes in a header). */
export function apiPath(path: string, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams()
  for (const [key, value] of Object.entries(params)) if (value !== undefined) query.set(key, value)
  const text = query.toString()
  return text ? `${path}?${text}` : path
}

export async function getJson<T>(path: string, token: string, signal?: AbortSignal): Promise<T> {
  const response = await fetch(path, {
    headers: { authorization: `Bearer ${token}`, accept: 'application/json' },
    credentials: 'omit',
    signal,
  })
  if (response.status === 401) throw new UnauthorizedError()
  const body = (await response.json().catch(() => ({}))) as T & { detail?: string; title?: string }
  if (!response.ok) {
    throw new Error(body.detail ?? body.title ?? `the API answered ${response.status}`)
  }
  return body
}

/** The fields every view asks for (no profile images: they live on another origin). */
export const POST_FIELDS =
  'author_id,created_at,lang,public_metrics,referenced_tweets,conversation_id'
export const USER_FIELDS = 'name,username'

export interface StreamHandlers {
  onPost(post: Post, users: User[]): void
  onState(state: 'live' | 'reconnecting' | 'stopped', detail?: string): void
  onUnauthorized(): void
}

/** Backoff after a drop: short at first, capped; a 429 waits longer (another tab holds a slot). */
const RETRY_MS = [500, 1_000, 2_000, 5_000, 10_000, 30_000]
const RATE_LIMITED_MS = 15_000
/** The stream sends a keep-alive well within this; silence longer means a dead connection. */
const SILENCE_MS = 45_000
/** docs/api.md §3.3: backfill_minutes is 0–5. */
const MAX_BACKFILL_MINUTES = 5

/**
 * Follows a conversation's live feed (one JSON object per `\r\n`-terminated line, bare `\r\n`
 * keep-alives) and reconnects by itself; after a drop it asks for the minutes it missed with
 * `backfill_minutes`, and the caller drops Posts it already shows.
 */
export function followStream(path: string, token: string, handlers: StreamHandlers): () => void {
  let stopped = false
  let failures = 0
  // The first connection asks for no past: the caller reads the tree once it is connected. A
  // reconnection asks for the minutes since the feed was last heard (the caller drops duplicates).
  let lastHeard: number | undefined
  let tries = 0
  const firstAttempt = Date.now()
  let controller: AbortController | undefined
  let timer: ReturnType<typeof setTimeout> | undefined

  const schedule = (ms: number) => {
    if (stopped) return
    handlers.onState('reconnecting')
    timer = setTimeout(() => void connect(), ms)
  }

  const connect = async () => {
    if (stopped) return
    controller = new AbortController()
    // A feed that never connected still covers the time since its first try: the tree was read
    // meanwhile.
    const since = tries++ === 0 ? undefined : (lastHeard ?? firstAttempt)
    const missedMinutes = since === undefined ? 0 : Math.ceil((Date.now() - since) / 60_000)
    const backfill =
      since === undefined
        ? undefined
        : String(Math.min(MAX_BACKFILL_MINUTES, Math.max(1, missedMinutes)))
    let silence: ReturnType<typeof setTimeout> | undefined
    const hear = () => {
      lastHeard = Date.now()
      clearTimeout(silence)
      silence = setTimeout(() => controller?.abort(), SILENCE_MS)
    }
    try {
      const url = backfill === undefined ? path : `${path}&backfill_minutes=${backfill}`
      const response = await fetch(url, {
        headers: { authorization: `Bearer ${token}` },
        credentials: 'omit',
        signal: controller.signal,
      })
      if (response.status === 401) {
        stopped = true
        handlers.onState('stopped', 'token refused')
        handlers.onUnauthorized()
        return
      }
      if (!response.ok || !response.body) {
        failures++
        return schedule(response.status === 429 ? RATE_LIMITED_MS : retryDelay(failures))
      }
      hear()
      handlers.onState('live')
      failures = 0
      const reader = response.body.pipeThrough(new TextDecoderStream()).getReader()
      let buffered = ''
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        hear()
        buffered += value
        let end: number
        while ((end = buffered.indexOf('\n')) >= 0) {
          const line = buffered.slice(0, end).trim()
          buffered = buffered.slice(end + 1)
          if (line === '') continue
          const message = JSON.parse(line) as Page<Post, unknown> & { data?: Post }
          const post = message.data as Post | undefined
          if (post && !Array.isArray(post)) handlers.onPost(post, message.includes?.users ?? [])
        }
      }
      failures++
      schedule(retryDelay(failures))
    } catch {
      if (stopped) return
      failures++
      schedule(retryDelay(failures))
    } finally {
      clearTimeout(silence)
    }
  }

  void connect()
  return () => {
    stopped = true
    clearTimeout(timer)
    controller?.abort()
    handlers.onState('stopped')
  }
}

function retryDelay(failures: number): number {
  return RETRY_MS[Math.min(failures - 1, RETRY_MS.length - 1)]!
}
