import { setImmediate as yieldToLoop } from 'node:timers/promises'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { addRules, deleteRules, listRules, type Db, type StreamRule } from '@threadline/db'
import { formatPostTime, isId } from '@threadline/domain'
import { ApiError, InvalidRequestError, PROBLEM_BASE } from '../errors.js'
import { ruleValueErrors } from '../query-language.js'
import { RULES_GET_PARAMS, RULES_PER_REQUEST, RULES_POST_PARAMS } from '../specs.js'
import type { ApiOptions, ServerContext } from '../types.js'
import { addRoute, compact, rawParam, type Body, type Endpoint } from './route.js'
import { invalidToken } from './window.js'

export const RULES_LIST = {
  method: 'GET',
  url: '/2/tweets/search/stream/rules',
  name: 'rules-list',
  group: 'rules',
  params: RULES_GET_PARAMS,
  summary: "The app's rules",
} as const satisfies Endpoint<typeof RULES_GET_PARAMS>

export const RULES_CHANGE = {
  method: 'POST',
  url: '/2/tweets/search/stream/rules',
  name: 'rules-change',
  group: 'rules',
  params: RULES_POST_PARAMS,
  summary: 'Add or delete rules',
} as const satisfies Endpoint<typeof RULES_POST_PARAMS>

/** Rule values parsed between two turns of the event loop. */
const RULE_PARSE_SLICE = 10

function ruleWire(r: StreamRule) {
  return r.tag === null ? { id: r.id, value: r.value } : { id: r.id, value: r.value, tag: r.tag }
}

/**
 * The filtered stream's rules (docs/api.md §3.1, §3.2), read from and written to the primary
 * (read-your-writes).
 */
export function registerRulesRoutes(app: FastifyInstance, ctx: ServerContext): void {
  const { db, options, pageTokens } = ctx

  addRoute(app, ctx, RULES_LIST, async (c) => {
    const limit = c.params.max_results ?? 1000
    const scope = `rules\n${c.client.app_id}\n${rawParam(c.request, 'ids')}`
    const token = c.params.pagination_token
    let afterId: string | undefined
    if (token !== undefined) {
      afterId = pageTokens.decode(scope, token)
      if (afterId === undefined || !isId(afterId)) throw invalidToken('pagination_token', token)
    }
    const rows = await listRules(db, c.client.app_id, {
      ids: c.params.ids,
      limit: limit + 1,
      afterId,
    })
    const more = rows.length > limit
    if (more) rows.length = limit
    const meta: Body = { sent: formatPostTime(c.now), result_count: rows.length }
    if (more) meta.next_token = pageTokens.encode(scope, rows[rows.length - 1]!.id)
    return { body: compact({ data: rows.map(ruleWire), meta }) }
  })

  addRoute(app, ctx, RULES_CHANGE, async (c) => {
    const dryRun = c.params.dry_run ?? false
    const deleteAll = c.params.delete_all ?? false
    const sent = formatPostTime(c.now)
    const body = readJsonBody(c.request, !deleteAll)
    const appId = c.client.app_id
    if (deleteAll) {
      const result = await deleteRules(db, appId, { all: true }, { dryRun })
      return {
        body: {
          meta: { sent, summary: { deleted: result.deleted.length, not_deleted: 0 } },
        },
      }
    }
    if (body && 'add' in body) return addRulesRequest(db, options, appId, body.add, dryRun, sent)
    return deleteRulesRequest(db, appId, body?.delete, dryRun, sent)
  })
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

async function addRulesRequest(
  db: Db,
  options: ApiOptions,
  appId: string,
  add: unknown,
  dryRun: boolean,
  sent: string,
) {
  if (!Array.isArray(add) || add.length === 0) {
    throw bodyError('`add` must be a non-empty list of rules')
  }
  const perRequest = Math.min(options.ruleCap, RULES_PER_REQUEST)
  if (add.length > perRequest) {
    throw bodyError(`\`add\` may hold at most ${perRequest} rules`)
  }
  const errors: Body[] = []
  const valid: Array<{ value: string; tag: string | null }> = []
  for (const [i, rule] of add.entries()) {
    // Parsing a thousand long rules takes a while: other requests get the loop between slices.
    if (i > 0 && i % RULE_PARSE_SLICE === 0) await yieldToLoop()
    if (!isObject(rule) || typeof rule.value !== 'string') {
      throw bodyError(`add[${i}].value must be a string`)
    }
    const value = rule.value
    const tag = rule.tag ?? null
    if (tag !== null && typeof tag !== 'string') throw bodyError(`add[${i}].tag must be a string`)
    const reasons = ruleValueErrors(value, options.queryMaxLength)
    if (reasons.length > 0) {
      errors.push({
        value,
        details: reasons,
        title: 'UnprocessableEntity',
        type: `${PROBLEM_BASE}invalid-rules`,
      })
    } else {
      valid.push({ value, tag })
    }
  }
  const result = valid.length
    ? await addRules(db, appId, valid, { cap: options.ruleCap, dryRun })
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

async function deleteRulesRequest(
  db: Db,
  appId: string,
  d: unknown,
  dryRun: boolean,
  sent: string,
) {
  const isStrings = (v: unknown): v is string[] =>
    Array.isArray(v) && v.length > 0 && v.every((x) => typeof x === 'string')
  let by: { ids: string[] } | { values: string[] }
  const listed = isObject(d) ? (d.ids ?? d.values) : undefined
  if (Array.isArray(listed) && listed.length > RULES_PER_REQUEST) {
    throw bodyError(`\`delete\` may hold at most ${RULES_PER_REQUEST} ids or values`)
  }
  if (isObject(d) && isStrings(d.ids) && d.values === undefined) {
    const bad = d.ids.filter((id) => !isId(id))
    if (bad.length > 0) throw bodyError(`delete.ids value [${bad[0]}] does not match ^[0-9]{1,19}$`)
    by = { ids: d.ids }
  } else if (isObject(d) && isStrings(d.values) && d.ids === undefined) {
    by = { values: d.values }
  } else {
    throw bodyError('`delete` must hold a non-empty list of `ids` or of `values`')
  }
  const result = await deleteRules(db, appId, by, { dryRun })
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

function bodyError(message: string): InvalidRequestError {
  return new InvalidRequestError([{ parameters: {}, message }])
}

/** The JSON body of a POST: content type checked, parsed, exactly one of `add` / `delete`. */
function readJsonBody(request: FastifyRequest, required: boolean): Body | undefined {
  const type = request.headers['content-type']
  const raw = request.body
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
  if (!isObject(parsed)) {
    throw bodyError('The request body must be a JSON object with `add` or `delete`.')
  }
  const keys = Object.keys(parsed)
  if (!required) return parsed
  if (keys.length !== 1 || !(keys[0] === 'add' || keys[0] === 'delete')) {
    throw bodyError('The request body must hold exactly one of `add` or `delete`.')
  }
  return parsed
}
