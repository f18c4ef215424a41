import { setImmediate as yieldToLoop } from 'node:timers/promises'
import type { FastifyInstance } from 'fastify'
import {
  addRules,
  countPosts,
  deleteRules,
  listRules,
  postsByIds,
  searchPosts,
  searchWirePosts,
  wirePostsByIds,
  type Granularity,
  type StreamRule,
} from '@threadline/db'
import {
  formatPostTime,
  isId,
  notFound,
  primaryFields,
  selection,
  type FieldSelection,
  type WirePost,
} from '@threadline/domain'
import { ApiError, invalidRequest, InvalidRequestError, PROBLEM_BASE } from './errors.js'
import { parseParams, queryEntries, type ParsedParams } from './params.js'
import { countsPage } from './counts-page.js'
import { compileQuery, ruleValueErrors } from './query-language.js'
import { renderPosts } from './render.js'
import type { RateGroup, RouteContext, ServerContext } from './types.js'
import type { EndpointParams } from './params.js'
import {
  COUNTS_PARAMS,
  LOOKUP_ONE_PARAMS,
  LOOKUP_PARAMS,
  RULES_GET_PARAMS,
  RULES_PER_REQUEST,
  RULES_POST_PARAMS,
  SEARCH_ALL_PARAMS,
  SEARCH_RECENT_PARAMS,
} from './specs.js'

const DAY_MS = 86_400_000
/** Rule values parsed between two turns of the event loop. */
const RULE_PARSE_SLICE = 10
const RECENT_DAYS = 7

type Body = Record<string, unknown>

/** A response body: an object for Fastify to serialize, or JSON text already written. */
type Answer = { status?: number; body: Body } | { status?: number; json: string }

/**
 * A JSON object from members that are JSON text already, leaving out absent ones (as compact()
 * does for objects). Pages of Posts in wire form (WirePostText) are answered this way, never
 * parsed and serialized again.
 */
function jsonObject(members: Array<[string, string | undefined]>): string {
  const parts: string[] = []
  for (const [key, value] of members) if (value !== undefined) parts.push(`"${key}":${value}`)
  return `{${parts.join(',')}}`
}

/** A JSON array of JSON texts, or undefined when empty (docs/api.md §1: never []). */
function jsonArray(items: readonly string[]): string | undefined {
  return items.length === 0 ? undefined : `[${items.join(',')}]`
}

const jsonOf = (value: readonly unknown[]): string | undefined =>
  value.length === 0 ? undefined : JSON.stringify(value)

/** Leaves out members with nothing in them (docs/api.md §1: never null, never []). */
function compact(body: Body): Body {
  const out: Body = {}
  for (const [k, v] of Object.entries(body)) {
    if (v === undefined || v === null) continue
    if (Array.isArray(v) && v.length === 0) continue
    out[k] = v
  }
  return out
}

function fieldSelection(p: ParsedParams): FieldSelection {
  return selection(
    (p['tweet.fields'] as string[] | undefined) ?? [],
    (p.expansions as string[] | undefined) ?? [],
    (p['user.fields'] as string[] | undefined) ?? [],
  )
}

/** `YYYY-MM-DDTHH:MMZ`, as X's time-window message prints its bound. */
function minuteTime(date: Date): string {
  return date.toISOString().slice(0, 16) + 'Z'
}

function rawParam(c: RouteContext, name: string): string {
  return queryEntries(c.request.url).find(([k]) => k === name)?.[1] ?? ''
}

function pageToken(c: RouteContext): { name: string; value: string } | undefined {
  const next = c.params.next_token as string | undefined
  const pagination = c.params.pagination_token as string | undefined
  if (next !== undefined && pagination !== undefined && next !== pagination) {
    throw invalidRequest(
      'pagination_token',
      [pagination],
      'The `next_token` and `pagination_token` query parameters must be the same when both are given',
    )
  }
  if (next !== undefined) return { name: 'next_token', value: next }
  if (pagination !== undefined) return { name: 'pagination_token', value: pagination }
  return undefined
}

function invalidToken(name: string, value: string): InvalidRequestError {
  return invalidRequest(
    name,
    [value],
    `The \`${name}\` query parameter value [${value}] is not a valid token for this request`,
  )
}

interface TimeWindow {
  startTime?: Date
  endTime?: Date
  sinceId?: string
  untilId?: string
}

/** start/end/since/until, with the recent endpoints' 7-day floor (docs/api.md §2.4). */
function timeWindow(c: RouteContext, now: Date, recent: boolean): TimeWindow {
  const w: TimeWindow = {
    startTime: c.params.start_time as Date | undefined,
    endTime: c.params.end_time as Date | undefined,
    sinceId: c.params.since_id as string | undefined,
    untilId: c.params.until_id as string | undefined,
  }
  if (recent) {
    const floor = new Date(now.getTime() - RECENT_DAYS * DAY_MS)
    if (w.startTime && w.startTime < floor) {
      const raw = rawParam(c, 'start_time')
      throw invalidRequest(
        'start_time',
        [raw],
        `Invalid 'start_time':'${raw}'. 'start_time' must be on or after ${minuteTime(floor)}`,
      )
    }
    w.startTime ??= floor
  }
  if (w.startTime && w.endTime && w.endTime <= w.startTime) {
    const raw = rawParam(c, 'end_time')
    throw invalidRequest(
      'end_time',
      [raw],
      `Invalid 'end_time':'${raw}'. 'end_time' must be after 'start_time'`,
    )
  }
  return w
}

/**
 * What a page token is bound to: the endpoint, the query and the window as the client wrote them
 * (plus `extra`), never the page size or the fields. A token from another request is refused.
 */
function tokenScope(
  c: RouteContext,
  endpoint: string,
  query: string,
  w: TimeWindow,
  ...extra: string[]
) {
  return [
    endpoint,
    query,
    rawParam(c, 'start_time'),
    rawParam(c, 'end_time'),
    w.sinceId ?? '',
    w.untilId ?? '',
    ...extra,
  ].join('\n')
}

function ruleWire(r: StreamRule) {
  return r.tag === null ? { id: r.id, value: r.value } : { id: r.id, value: r.value, tag: r.tag }
}

export function registerRoutes(app: FastifyInstance, ctx: ServerContext): void {
  // Posts come from the replica when there is one; rules from the primary (read-your-writes).
  const { db, readDb, options } = ctx

  const route = (
    method: 'GET' | 'POST',
    url: string,
    endpoint: { name: string; group: RateGroup; params: EndpointParams; summary: string },
    handler: (c: RouteContext) => Promise<Answer>,
  ) => {
    app.route({
      method,
      url,
      config: { endpoint },
      handler: async (request, reply) => {
        const params = parseParams(
          endpoint.params,
          queryEntries(request.url),
          (request.params ?? {}) as Record<string, string>,
        )
        const answer = await handler({
          params,
          client: request.client!,
          request,
          reply,
          now: ctx.now(),
        })
        reply.status(answer.status ?? 200)
        if ('json' in answer) return reply.type('application/json; charset=utf-8').send(answer.json)
        return reply.send(answer.body)
      },
    })
  }

  // --- lookup (docs/api.md §2.3) ---
  route(
    'GET',
    '/2/tweets',
    { name: 'tweets-lookup', group: 'lookup', params: LOOKUP_PARAMS, summary: 'Posts by ids' },
    async (c) => {
      const ids = [...new Set(c.params.ids as string[])]
      const sel = fieldSelection(c.params)
      if (sel.expansions.size === 0) {
        // No includes to resolve: the Posts come back from Postgres as wire JSON text.
        const rows = await wirePostsByIds(readDb, ids, [...primaryFields(sel)])
        const found = new Map(rows.map((r) => [r.id, r.json]))
        const data = ids.flatMap((id) => found.get(id) ?? [])
        const missing = ids.filter((id) => !found.has(id)).map((id) => notFound('tweet', 'ids', id))
        return {
          json: jsonObject([
            ['data', jsonArray(data)],
            ['errors', jsonOf(missing)],
          ]),
        }
      }
      const rows = await postsByIds(readDb, ids)
      const found = new Map(rows.map((r) => [r.id, r]))
      const ordered = ids.flatMap((id) => {
        const row = found.get(id)
        return row ? [row] : []
      })
      const page = await renderPosts(readDb, ordered, sel)
      const missing = ids.filter((id) => !found.has(id)).map((id) => notFound('tweet', 'ids', id))
      return {
        body: compact({
          data: page.data,
          includes: page.includes,
          errors: [...missing, ...page.errors],
        }),
      }
    },
  )

  route(
    'GET',
    '/2/tweets/:id',
    {
      name: 'tweets-lookup-one',
      group: 'lookup',
      params: LOOKUP_ONE_PARAMS,
      summary: 'A Post by id',
    },
    async (c) => {
      const id = c.params.id as string
      const sel = fieldSelection(c.params)
      if (sel.expansions.size === 0) {
        const [row] = await wirePostsByIds(readDb, [id], [...primaryFields(sel)])
        if (!row) return { body: { errors: [notFound('tweet', 'id', id)] } }
        return { json: jsonObject([['data', row.json]]) }
      }
      const rows = await postsByIds(readDb, [id])
      if (rows.length === 0) return { body: { errors: [notFound('tweet', 'id', id)] } }
      const page = await renderPosts(readDb, rows, sel)
      return {
        body: compact({ data: page.data[0], includes: page.includes, errors: page.errors }),
      }
    },
  )

  // --- search (docs/api.md §2.4) ---
  const search = (kind: 'recent' | 'all') => async (c: RouteContext) => {
    const query = c.params.query as string
    const { condition, prepared } = compileQuery(query, options.queryMaxLength)
    const w = timeWindow(c, c.now, kind === 'recent')
    const limit = (c.params.max_results as number | undefined) ?? 10
    const scope = tokenScope(c, `search/${kind}`, query, w)
    const token = pageToken(c)
    let beforeId: string | undefined
    if (token) {
      beforeId = ctx.pageTokens.decode(scope, token.value)
      if (beforeId === undefined || !isId(beforeId)) throw invalidToken(token.name, token.value)
    }
    const sel = fieldSelection(c.params)
    const pageMeta = (ids: readonly string[], more: boolean): Body => {
      const oldest = ids[ids.length - 1]!
      const meta: Body = { newest_id: ids[0]!, oldest_id: oldest, result_count: ids.length }
      if (more) meta.next_token = ctx.pageTokens.encode(scope, oldest)
      return meta
    }
    const window = { ...w, beforeId, limit, prepared }
    if (sel.expansions.size === 0) {
      // No includes to resolve: the page comes back from Postgres as wire JSON text.
      const fields = [...primaryFields(sel)]
      const { posts, more } = await searchWirePosts(readDb, condition, window, fields)
      if (posts.length === 0) return { body: { meta: { result_count: 0 } } }
      const meta = pageMeta(
        posts.map((p) => p.id),
        more,
      )
      const data = jsonArray(posts.map((p) => p.json))
      return {
        json: jsonObject([
          ['data', data],
          ['meta', JSON.stringify(meta)],
        ]),
      }
    }
    const { posts, more } = await searchPosts(readDb, condition, window)
    if (posts.length === 0) return { body: { meta: { result_count: 0 } } }
    const page = await renderPosts(readDb, posts, sel)
    const meta = pageMeta(
      posts.map((p) => p.id),
      more,
    )
    return {
      body: compact({ data: page.data, includes: page.includes, errors: page.errors, meta }),
    }
  }
  route(
    'GET',
    '/2/tweets/search/recent',
    {
      name: 'search-recent',
      group: 'search',
      params: SEARCH_RECENT_PARAMS,
      summary: 'Search the last 7 days',
    },
    search('recent'),
  )
  route(
    'GET',
    '/2/tweets/search/all',
    {
      name: 'search-all',
      group: 'search',
      params: SEARCH_ALL_PARAMS,
      summary: 'Search everything',
    },
    search('all'),
  )

  // --- counts (docs/api.md §2.6) ---
  const counts = (kind: 'recent' | 'all') => async (c: RouteContext) => {
    const query = c.params.query as string
    const { condition } = compileQuery(query, options.queryMaxLength)
    const now = c.now
    const w = timeWindow(c, now, kind === 'recent')
    const latest = new Date(now.getTime() - 10_000)
    const endTime = w.endTime && w.endTime < latest ? w.endTime : latest
    const startTime = w.startTime ?? new Date(endTime.getTime() - 30 * DAY_MS)
    const granularity = (c.params.granularity as Granularity | undefined) ?? 'hour'
    const scope = tokenScope(c, `counts/${kind}`, query, w, granularity)
    // Pages go backwards in time; a token holds the end of the next (older) page.
    let position: number | undefined
    const token = pageToken(c)
    if (token) {
      const decoded = ctx.pageTokens.decode(scope, token.value)
      position = decoded !== undefined && /^\d{1,15}$/.test(decoded) ? Number(decoded) : NaN
    }
    const page =
      position === undefined || !Number.isNaN(position)
        ? countsPage({ start: startTime, end: endTime }, granularity, position)
        : undefined
    if (!page) throw invalidToken(token!.name, token!.value)
    const buckets =
      page.end > page.start
        ? await countPosts(readDb, condition, {
            ...w,
            startTime: page.start,
            endTime: page.end,
            granularity,
          })
        : []
    const total = buckets.reduce((sum, b) => sum + b.tweet_count, 0)
    const meta: Body = { total_tweet_count: total }
    if (page.next !== undefined) meta.next_token = ctx.pageTokens.encode(scope, String(page.next))
    // Hundreds of buckets a page: written as text (their times come formatted from Postgres).
    const data = buckets.map(
      (b) => `{"end":"${b.end}","start":"${b.start}","tweet_count":${b.tweet_count}}`,
    )
    return {
      json: jsonObject([
        ['data', jsonArray(data)],
        ['meta', JSON.stringify(meta)],
      ]),
    }
  }
  route(
    'GET',
    '/2/tweets/counts/recent',
    {
      name: 'counts-recent',
      group: 'counts',
      params: COUNTS_PARAMS,
      summary: 'Counts, last 7 days',
    },
    counts('recent'),
  )
  route(
    'GET',
    '/2/tweets/counts/all',
    { name: 'counts-all', group: 'counts', params: COUNTS_PARAMS, summary: 'Counts, everything' },
    counts('all'),
  )

  // --- stream rules (docs/api.md §3.1, §3.2) ---
  route(
    'GET',
    '/2/tweets/search/stream/rules',
    { name: 'rules-list', group: 'rules', params: RULES_GET_PARAMS, summary: "The app's rules" },
    async (c) => {
      const limit = (c.params.max_results as number | undefined) ?? 1000
      const scope = `rules\n${c.client.app_id}\n${rawParam(c, 'ids')}`
      const token = c.params.pagination_token as string | undefined
      let afterId: string | undefined
      if (token !== undefined) {
        afterId = ctx.pageTokens.decode(scope, token)
        if (afterId === undefined || !isId(afterId)) throw invalidToken('pagination_token', token)
      }
      const rows = await listRules(db, c.client.app_id, {
        ids: c.params.ids as string[] | undefined,
        limit: limit + 1,
        afterId,
      })
      const more = rows.length > limit
      if (more) rows.length = limit
      const meta: Body = { sent: formatPostTime(c.now), result_count: rows.length }
      if (more) meta.next_token = ctx.pageTokens.encode(scope, rows[rows.length - 1]!.id)
      return { body: compact({ data: rows.map(ruleWire), meta }) }
    },
  )

  route(
    'POST',
    '/2/tweets/search/stream/rules',
    {
      name: 'rules-change',
      group: 'rules',
      params: RULES_POST_PARAMS,
      summary: 'Add or delete rules',
    },
    async (c) => {
      const dryRun = (c.params.dry_run as boolean | undefined) ?? false
      const deleteAll = (c.params.delete_all as boolean | undefined) ?? false
      const sent = formatPostTime(c.now)
      const body = readJsonBody(c, !deleteAll)
      if (deleteAll) {
        const result = await deleteRules(db, c.client.app_id, { all: true }, { dryRun })
        return {
          body: {
            meta: { sent, summary: { deleted: result.deleted.length, not_deleted: 0 } },
          },
        }
      }
      if (body && 'add' in body) return addRulesRequest(c, body.add, dryRun, sent)
      return deleteRulesRequest(c, body!.delete, dryRun, sent)
    },
  )

  async function addRulesRequest(c: RouteContext, add: unknown, dryRun: boolean, sent: string) {
    if (!Array.isArray(add) || add.length === 0) {
      throw bodyError('`add` must be a non-empty list of rules')
    }
    const perRequest = Math.min(options.ruleCap, RULES_PER_REQUEST)
    if (add.length > perRequest) {
      throw bodyError(`\`add\` may hold at most ${perRequest} rules`)
    }
    const errors: Body[] = []
    const valid: Array<{ value: string; tag: string | null }> = []
    for (const [i, item] of add.entries()) {
      // Parsing a thousand long rules takes a while: other requests get the loop between slices.
      if (i > 0 && i % RULE_PARSE_SLICE === 0) await yieldToLoop()
      const rule = item as { value?: unknown; tag?: unknown } | null
      if (typeof rule !== 'object' || rule === null || typeof rule.value !== 'string') {
        throw bodyError(`add[${i}].value must be a string`)
      }
      if (rule.tag !== undefined && rule.tag !== null && typeof rule.tag !== 'string') {
        throw bodyError(`add[${i}].tag must be a string`)
      }
      const reasons = ruleValueErrors(rule.value, options.queryMaxLength)
      if (reasons.length > 0) {
        errors.push({
          value: rule.value,
          details: reasons,
          title: 'UnprocessableEntity',
          type: `${PROBLEM_BASE}invalid-rules`,
        })
      } else {
        valid.push({ value: rule.value, tag: (rule.tag as string | undefined) ?? null })
      }
    }
    const result = valid.length
      ? await addRules(db, c.client.app_id, valid, { cap: options.ruleCap, dryRun })
      : { created: [], duplicates: [], capExceeded: false }
    if (result.capExceeded) {
      throw new ApiError(400, {
        title: 'RulesCapExceeded',
        detail: `Rule creation would pass this app's cap of ${options.ruleCap} rules; nothing was created.`,
        type: `${PROBLEM_BASE}rule-cap`,
      })
    }
    for (const d of result.duplicates) {
      errors.push({
        value: d.value,
        id: d.id,
        title: 'DuplicateRule',
        type: `${PROBLEM_BASE}duplicate-rules`,
      })
    }
    const created = result.created.length
    return {
      status: created > 0 ? 201 : 200,
      body: compact({
        data: result.created.map((r) =>
          r.tag === null ? { value: r.value, id: r.id } : { value: r.value, tag: r.tag, id: r.id },
        ),
        meta: {
          sent,
          summary: {
            created,
            not_created: add.length - created,
            valid: valid.length,
            invalid: add.length - valid.length,
          },
        },
        errors,
      }),
    }
  }

  async function deleteRulesRequest(c: RouteContext, del: unknown, dryRun: boolean, sent: string) {
    const d = del as { ids?: unknown; values?: unknown } | null
    const isStrings = (v: unknown): v is string[] =>
      Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')
    let by: { ids: string[] } | { values: string[] }
    const listed = d && typeof d === 'object' ? (d.ids ?? d.values) : undefined
    if (Array.isArray(listed) && listed.length > RULES_PER_REQUEST) {
      throw bodyError(`\`delete\` may hold at most ${RULES_PER_REQUEST} ids or values`)
    }
    if (d && typeof d === 'object' && isStrings(d.ids) && d.values === undefined) {
      const bad = d.ids.filter((id) => !isId(id))
      if (bad.length > 0)
        throw bodyError(`delete.ids value [${bad[0]}] does not match ^[0-9]{1,19}$`)
      by = { ids: d.ids }
    } else if (d && typeof d === 'object' && isStrings(d.values) && d.ids === undefined) {
      by = { values: d.values }
    } else {
      throw bodyError('`delete` must hold a non-empty list of `ids` or of `values`')
    }
    const result = await deleteRules(db, c.client.app_id, by, { dryRun })
    const asked = new Set('ids' in by ? by.ids : by.values)
    return {
      body: compact({
        meta: {
          sent,
          summary: {
            deleted: result.deleted.length,
            not_deleted: asked.size - result.deleted.length,
          },
        },
        errors: result.notFound.map((value) => ({
          value,
          details: ['ids' in by ? 'rule_id not found' : 'rule value not found'],
          title: 'Invalid Request',
          type: `${PROBLEM_BASE}invalid-request`,
        })),
      }),
    }
  }
}

function bodyError(message: string): InvalidRequestError {
  return new InvalidRequestError([{ parameters: {}, message }])
}

/** The JSON body of a POST: content type checked, parsed, exactly one of `add` / `delete`. */
function readJsonBody(c: RouteContext, required: boolean): Body | undefined {
  const type = c.request.headers['content-type']
  const raw = c.request.body
  const empty = raw === undefined || raw === null || raw === ''
  if (empty && !required) return undefined
  if (!type || !/^application\/json\s*(;|$)/i.test(type)) {
    throw bodyError('Requests with bodies must have content-type of application/json.')
  }
  let parsed: unknown
  try {
    parsed = JSON.parse(String(raw))
  } catch {
    throw bodyError('The request body is not valid JSON.')
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
    throw bodyError('The request body must be a JSON object with `add` or `delete`.')
  }
  const body = parsed as Body
  const keys = Object.keys(body)
  if (!required) return body
  if (keys.length !== 1 || !(keys[0] === 'add' || keys[0] === 'delete')) {
    throw bodyError('The request body must hold exactly one of `add` or `delete`.')
  }
  return body
}

export type { WirePost }
