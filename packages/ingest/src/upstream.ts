/**
 * A small client for an X-compatible upstream (X itself, or the simulator): stream rules, the
 * filtered stream, search and lookup. Uses Node's fetch, and node:http for the stream; bodies are
 * handed on as raw text so the writer sees exactly what the upstream sent.
 */
import http from 'node:http'
import https from 'node:https'
import { pipeline, type Readable } from 'node:stream'
import { text as readText } from 'node:stream/consumers'
import { createGunzip } from 'node:zlib'

/**
 * Every field and expansion that storage keeps (docs/api.md §2.1: the Post object, the user object): a
 * subset of X's lists (TWEET_FIELDS, USER_FIELDS in @threadline/domain), asked for by fieldParams.
 */
const STORED_TWEET_FIELDS = [
  'attachments',
  'author_id',
  'context_annotations',
  'conversation_id',
  'created_at',
  'edit_controls',
  'edit_history_tweet_ids',
  'entities',
  'geo',
  'id',
  'in_reply_to_user_id',
  'lang',
  'note_tweet',
  'possibly_sensitive',
  'public_metrics',
  'referenced_tweets',
  'reply_settings',
  'source',
  'text',
  'withheld',
] as const

const STORED_USER_FIELDS = [
  'created_at',
  'description',
  'entities',
  'id',
  'location',
  'name',
  'pinned_tweet_id',
  'profile_image_url',
  'protected',
  'public_metrics',
  'url',
  'username',
  'verified',
  'verified_type',
  'withheld',
] as const

const STORED_EXPANSIONS = [
  'author_id',
  'in_reply_to_user_id',
  'referenced_tweets.id',
  'referenced_tweets.id.author_id',
  'entities.mentions.username',
] as const

/** The field and expansion parameters of every Post request the ingest makes. */
export function fieldParams(): Record<string, string> {
  return {
    'tweet.fields': STORED_TWEET_FIELDS.join(','),
    'user.fields': STORED_USER_FIELDS.join(','),
    expansions: STORED_EXPANSIONS.join(','),
  }
}

export interface RateLimit {
  limit?: number
  remaining?: number
  /** x-rate-limit-reset, as epoch milliseconds. */
  resetAt?: number
}

export function parseRateLimit(headers: Headers): RateLimit {
  const num = (name: string) => {
    const v = headers.get(name)
    if (v === null || !/^\d+$/.test(v.trim())) return undefined
    return Number(v)
  }
  const reset = num('x-rate-limit-reset')
  return {
    limit: num('x-rate-limit-limit'),
    remaining: num('x-rate-limit-remaining'),
    resetAt: reset === undefined ? undefined : reset * 1_000,
  }
}

/**
 * What to check when the upstream refuses the credentials (401, 403), to follow its answer in a
 * log line; empty for any other status. X answers 401 to a missing or wrong bearer token, and 403
 * to a token whose app lacks the endpoint's access level.
 */
export function authHint(status: number, hasToken: boolean): string {
  if (status === 401) {
    return hasToken
      ? ' (the upstream refused the bearer token: check UPSTREAM_BEARER_TOKEN)'
      : ' (no bearer token was sent: set UPSTREAM_BEARER_TOKEN)'
  }
  if (status === 403) {
    return " (the upstream denies this token's app access to the endpoint: check that UPSTREAM_BEARER_TOKEN belongs to an app with access to it)"
  }
  return ''
}

export class UpstreamHttpError extends Error {
  override name = 'UpstreamHttpError'
  constructor(
    readonly method: string,
    readonly path: string,
    readonly status: number,
    readonly body: string,
    readonly rateLimit: RateLimit,
    hint = '',
  ) {
    super(`${method} ${path} answered ${status}: ${body.slice(0, 300)}${hint}`)
  }
}

export interface UpstreamRuleItem {
  id: string
  value: string
  tag?: string
}

export interface AddRulesOutcome {
  /** Placed upstream (created now, or already there: the upstream reports the existing id). */
  placed: Array<{ value: string; id: string }>
  /** Refused by the upstream, with its reason. */
  rejected: Array<{ value: string; reason: string }>
}

export interface Page {
  /** The response body as received: one raw line for the `posts` queue. */
  body: string
  resultCount: number
  nextToken?: string
  rateLimit: RateLimit
}

export interface UpstreamOptions {
  /** Base URL without `/2`. */
  baseUrl: string
  bearerToken?: string
  /** Per request (not the stream), so a hung upstream never hangs a sync or a backfill. */
  requestTimeoutMs?: number
}

type Json = Record<string, unknown>
const isObj = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v)

export class UpstreamClient {
  private readonly base: string
  private readonly headers: Record<string, string>
  private readonly timeoutMs: number
  /** Whether requests carry a bearer token (for authHint). */
  readonly hasToken: boolean

  constructor(options: UpstreamOptions) {
    this.hasToken = Boolean(options.bearerToken)
    this.base = options.baseUrl.replace(/\/+$/, '')
    this.headers = {
      'user-agent': 'threadline-ingest',
      ...(options.bearerToken ? { authorization: `Bearer ${options.bearerToken}` } : {}),
    }
    this.timeoutMs = options.requestTimeoutMs ?? 30_000
  }

  url(path: string, params: Record<string, string | undefined> = {}): string {
    const u = new URL(this.base + path)
    for (const [k, v] of Object.entries(params)) if (v !== undefined) u.searchParams.set(k, v)
    return u.toString()
  }

  private async request(
    method: 'GET' | 'POST',
    path: string,
    params: Record<string, string | undefined>,
    body?: unknown,
    signal?: AbortSignal,
  ): Promise<{ status: number; text: string; rateLimit: RateLimit }> {
    const timeout = AbortSignal.timeout(this.timeoutMs)
    const res = await fetch(this.url(path, params), {
      method,
      headers:
        body === undefined ? this.headers : { ...this.headers, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
    })
    const text = await res.text()
    return { status: res.status, text, rateLimit: parseRateLimit(res.headers) }
  }

  private async json(
    method: 'GET' | 'POST',
    path: string,
    params: Record<string, string | undefined>,
    body?: unknown,
    signal?: AbortSignal,
    okStatuses: readonly number[] = [200, 201],
  ): Promise<{ status: number; text: string; json: Json; rateLimit: RateLimit }> {
    const res = await this.request(method, path, params, body, signal)
    if (!okStatuses.includes(res.status)) throw this.failed(method, path, res)
    let json: unknown
    try {
      json = JSON.parse(res.text)
    } catch {
      throw this.failed(method, path, res, `not JSON: ${res.text}`)
    }
    if (!isObj(json)) throw this.failed(method, path, res)
    return { ...res, json }
  }

  /** The error for a response this client cannot use, with authHint's advice on a 401 or 403. */
  private failed(
    method: string,
    path: string,
    res: { status: number; text: string; rateLimit: RateLimit },
    body = res.text,
  ): UpstreamHttpError {
    const hint = authHint(res.status, this.hasToken)
    return new UpstreamHttpError(method, path, res.status, body, res.rateLimit, hint)
  }

  /** Every rule the upstream holds, following pagination. */
  async listRules(signal?: AbortSignal): Promise<UpstreamRuleItem[]> {
    const rules: UpstreamRuleItem[] = []
    let token: string | undefined
    do {
      const { json } = await this.json(
        'GET',
        '/2/tweets/search/stream/rules',
        { max_results: '1000', pagination_token: token },
        undefined,
        signal,
      )
      for (const r of Array.isArray(json.data) ? json.data : []) {
        if (isObj(r) && typeof r.id === 'string' && typeof r.value === 'string') {
          rules.push({
            id: r.id,
            value: r.value,
            tag: typeof r.tag === 'string' ? r.tag : undefined,
          })
        }
      }
      const meta = isObj(json.meta) ? json.meta : {}
      token = typeof meta.next_token === 'string' ? meta.next_token : undefined
    } while (token)
    return rules
  }

  /**
   * Adds rule values. Per-value outcomes come from `data` and `errors` (DuplicateRule carries the
   * existing id). A 4xx refusal of a whole request of several values is retried value by value,
   * so that one bad value cannot block the others and its own reason is known. Values with no
   * outcome (neither placed nor refused) are left for the next sync.
   */
  async addRules(values: readonly string[], signal?: AbortSignal): Promise<AddRulesOutcome> {
    const outcome: AddRulesOutcome = { placed: [], rejected: [] }
    if (values.length === 0) return outcome
    const res = await this.request(
      'POST',
      '/2/tweets/search/stream/rules',
      {},
      { add: values.map((value) => ({ value })) },
      signal,
    )
    // Only a refusal of the content; auth, rate limit and server trouble are errors to retry.
    const refused = res.status === 400 || res.status === 422
    if (refused && values.length > 1) {
      for (const value of values) {
        const one = await this.addRules([value], signal)
        outcome.placed.push(...one.placed)
        outcome.rejected.push(...one.rejected)
      }
      return outcome
    }
    let json: unknown
    try {
      json = JSON.parse(res.text)
    } catch {
      json = undefined
    }
    if (!refused && (res.status >= 300 || !isObj(json))) {
      throw this.failed('POST', '/2/tweets/search/stream/rules', res)
    }
    const body = isObj(json) ? json : {}
    const asked = new Set(values)
    for (const r of Array.isArray(body.data) ? body.data : []) {
      if (
        isObj(r) &&
        typeof r.id === 'string' &&
        typeof r.value === 'string' &&
        asked.has(r.value)
      ) {
        outcome.placed.push({ value: r.value, id: r.id })
      }
    }
    const errors = Array.isArray(body.errors) ? body.errors.filter(isObj) : []
    for (const e of errors) {
      const value = typeof e.value === 'string' ? e.value : undefined
      if (value === undefined || !asked.has(value)) continue
      if (typeof e.id === 'string' && /duplicate/i.test(String(e.title ?? e.type ?? ''))) {
        outcome.placed.push({ value, id: e.id })
        continue
      }
      outcome.rejected.push({ value, reason: describeError(e) })
    }
    if (refused && outcome.rejected.length === 0 && outcome.placed.length === 0) {
      // One value refused without a per-value error: the body is the reason.
      outcome.rejected.push({
        value: values[0]!,
        reason: `${res.status}: ${summarise(body, res.text)}`,
      })
    }
    return outcome
  }

  async deleteRules(ids: readonly string[], signal?: AbortSignal): Promise<void> {
    if (ids.length === 0) return
    await this.json('POST', '/2/tweets/search/stream/rules', {}, { delete: { ids } }, signal)
  }

  /**
   * One page of search for `query`, with all fields and expansions; `bounds` narrows it to Posts
   * newer than `since_id` or made from `start_time` (window recovery).
   */
  async search(
    kind: 'recent' | 'all',
    query: string,
    nextToken: string | undefined,
    signal?: AbortSignal,
    bounds: { since_id?: string; start_time?: string } = {},
  ): Promise<Page> {
    const path = `/2/tweets/search/${kind}`
    const { text, json, rateLimit } = await this.json(
      'GET',
      path,
      { query, max_results: '100', next_token: nextToken, ...bounds, ...fieldParams() },
      undefined,
      signal,
      [200],
    )
    const meta = isObj(json.meta) ? json.meta : {}
    return {
      body: text,
      resultCount: Array.isArray(json.data) ? json.data.length : 0,
      nextToken: typeof meta.next_token === 'string' ? meta.next_token : undefined,
      rateLimit,
    }
  }

  /** Posts by id (`GET /2/tweets?ids=`), with all fields and expansions. */
  async lookup(ids: readonly string[], signal?: AbortSignal): Promise<Page> {
    const { text, json, rateLimit } = await this.json(
      'GET',
      '/2/tweets',
      { ids: ids.join(','), ...fieldParams() },
      undefined,
      signal,
      [200],
    )
    return {
      body: text,
      resultCount: Array.isArray(json.data) ? json.data.length : 0,
      rateLimit,
    }
  }

  /**
   * Opens the filtered stream; the caller reads (or refuses) the response. Through node:http, not
   * fetch: the stream is the ingest's one hot read, and fetch's web streams cost more CPU a line.
   * Asks for gzip and inflates it when the upstream sends it.
   */
  openStream(backfillMinutes: number, signal: AbortSignal): Promise<StreamResponse> {
    return this.openLongLived(
      '/2/tweets/search/stream',
      {
        ...fieldParams(),
        backfill_minutes: backfillMinutes > 0 ? String(backfillMinutes) : undefined,
      },
      signal,
    )
  }

  /**
   * Opens one partition of a compliance stream (`/2/tweets/compliance/stream` or
   * `/2/users/compliance/stream`); the caller reads it like the filtered stream.
   */
  openComplianceStream(
    kind: 'tweet' | 'user',
    partition: number,
    replay: { backfillMinutes?: number; startTime?: string },
    signal: AbortSignal,
  ): Promise<StreamResponse> {
    const backfill = replay.backfillMinutes ?? 0
    return this.openLongLived(
      `/2/${kind}s/compliance/stream`,
      {
        partition: String(partition),
        backfill_minutes: backfill > 0 ? String(backfill) : undefined,
        start_time: replay.startTime,
      },
      signal,
    )
  }

  /** `POST /2/compliance/jobs`: a batch compliance job, `created`, with its transfer URLs. */
  async createComplianceJob(
    type: 'tweets' | 'users',
    name: string,
    signal?: AbortSignal,
  ): Promise<UpstreamComplianceJob> {
    const path = '/2/compliance/jobs'
    const res = await this.json('POST', path, {}, { type, name }, signal)
    const job = complianceJobOf(res.json.data)
    if (!job) throw this.failed('POST', path, res, `no job in the answer: ${res.text}`)
    return job
  }

  /** `GET /2/compliance/jobs/:id`; undefined when the upstream no longer knows the job. */
  async complianceJob(
    id: string,
    signal?: AbortSignal,
  ): Promise<UpstreamComplianceJob | undefined> {
    const { json } = await this.json(
      'GET',
      `/2/compliance/jobs/${id}`,
      {},
      undefined,
      signal,
      [200],
    )
    return complianceJobOf(json.data)
  }

  private openLongLived(
    path: string,
    params: Record<string, string | undefined>,
    signal: AbortSignal,
  ): Promise<StreamResponse> {
    const url = new URL(this.url(path, params))
    const get = url.protocol === 'https:' ? https.get : http.get
    return new Promise((resolve, reject) => {
      // Its own socket (agent: false): a stream holds its connection for hours anyway, and with
      // the keep-alive pool a stream that had ended (an operational disconnect) gave its socket
      // back, where the abort that closes the connection then raised an unheard AbortError.
      const req = get(url, {
        headers: { ...this.headers, 'accept-encoding': 'gzip' },
        signal,
        agent: false,
      })
      req.once('error', reject)
      req.once('response', (res) => {
        const encoding = String(res.headers['content-encoding'] ?? '').toLowerCase()
        const body: Readable =
          encoding === 'gzip' || encoding === 'x-gzip'
            ? pipeline(res, createGunzip(), () => {})
            : res
        // Errors after this surface where the body is read (or are dropped with it).
        req.off('error', reject)
        req.on('error', () => {})
        resolve({
          status: res.statusCode ?? 0,
          headers: new Headers(
            Object.entries(res.headers).flatMap(([name, value]): [string, string][] =>
              value === undefined ? [] : [[name, Array.isArray(value) ? value.join(', ') : value]],
            ),
          ),
          body,
          text: () => readText(body),
        })
      })
    })
  }
}

/** What the ingest reads of X's ComplianceJob. */
export interface UpstreamComplianceJob {
  id: string
  status: string
  uploadUrl: string
  downloadUrl: string
}

function complianceJobOf(data: unknown): UpstreamComplianceJob | undefined {
  if (!isObj(data)) return undefined
  const { id, status, upload_url: uploadUrl, download_url: downloadUrl } = data
  if (typeof id !== 'string' || typeof status !== 'string') return undefined
  if (typeof uploadUrl !== 'string' || typeof downloadUrl !== 'string') return undefined
  return { id, status, uploadUrl, downloadUrl }
}

/** The filtered stream's response: its status and headers, and its body as bytes. */
export interface StreamResponse {
  status: number
  headers: Headers
  body: AsyncIterable<Buffer>
  /** The whole body as text (an error response's). */
  text(): Promise<string>
}

function describeError(e: Json): string {
  const details = Array.isArray(e.details) ? e.details.filter((d) => typeof d === 'string') : []
  const title = typeof e.title === 'string' ? e.title : 'rejected'
  const detail = typeof e.detail === 'string' ? e.detail : undefined
  return [title, ...(details.length ? details : detail ? [detail] : [])].join(': ')
}

function summarise(body: Json, text: string): string {
  const errors = Array.isArray(body.errors) ? body.errors.filter(isObj) : []
  if (errors.length > 0) return errors.map(describeError).join('; ')
  if (typeof body.detail === 'string') return body.detail
  return text.slice(0, 500)
}
