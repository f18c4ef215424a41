import type { FastifyInstance } from 'fastify'
import { conversationSummaries, listAllRules, type ConversationSummary } from '@threadline/db'
import { formatPostTime } from '@threadline/domain'
import { conversationIdOf, parseQuery } from '@threadline/query'
import type { EndpointParams } from '../params.js'
import type { ServerContext } from '../types.js'
import { addRoute, type Endpoint } from '../routes/route.js'
import { invalidToken } from '../routes/window.js'

export const CONVERSATIONS_LIST_PARAMS = {
  max_results: {
    kind: 'int',
    min: 1,
    max: 100,
    description: 'Conversations per page (default 100)',
  },
  pagination_token: { kind: 'string', description: 'meta.next_token of the previous page' },
} as const satisfies EndpointParams

export const CONVERSATIONS_LIST = {
  method: 'GET',
  url: '/2/conversations',
  name: 'conversations-list',
  group: 'lookup',
  params: CONVERSATIONS_LIST_PARAMS,
  summary: "The conversations the app's conversation_id: rules follow",
} as const satisfies Endpoint<typeof CONVERSATIONS_LIST_PARAMS>

const DEFAULT_PAGE = 100

/** The conversation a rule value follows: exactly one `conversation_id:<id>` term. */
export function conversationOfRule(value: string): string | undefined {
  if (!value.includes('conversation_id:')) return undefined
  const parsed = parseQuery(value)
  return parsed.ok ? conversationIdOf(parsed.ast) : undefined
}

const compareIds = (a: string, b: string): number =>
  a.length !== b.length ? a.length - b.length : a < b ? -1 : a > b ? 1 : 0

/**
 * Where a conversation stands in the list, as a string that orders it (docs/api.md §5): nothing
 * stored yet first, newest rule first; then newest activity first; the id last. The position in a
 * token is this key, so a page goes on after it whatever moved meanwhile.
 */
interface ListKey {
  stored: boolean
  /** The newest rule's id while nothing is stored; last_created_at in ms after. */
  rank: string
  id: string
}

function compareKeys(a: ListKey, b: ListKey): number {
  if (a.stored !== b.stored) return a.stored ? 1 : -1
  return compareIds(b.rank, a.rank) || compareIds(b.id, a.id)
}

const encodeKey = (k: ListKey) => `${k.stored ? 1 : 0}:${k.rank}:${k.id}`

function decodeKey(position: string): ListKey | undefined {
  const m = /^([01]):(\d{1,19}):(\d{1,19})$/.exec(position)
  return m ? { stored: m[1] === '1', rank: m[2]!, id: m[3]! } : undefined
}

function summaryWire(s: ConversationSummary, ruleIds: string[], defaultSource: 'recent' | 'all') {
  const stored = s.post_count > 0 && s.last_created_at !== null
  return {
    id: s.id,
    rule_ids: ruleIds,
    post_count: s.post_count,
    reply_count: s.reply_count,
    ...(s.reported_reply_count !== null ? { reported_reply_count: s.reported_reply_count } : {}),
    ...(s.root_author_id !== null ? { root_author_id: s.root_author_id } : {}),
    ...(stored
      ? {
          first_created_at: formatPostTime(s.first_created_at!),
          last_created_at: formatPostTime(s.last_created_at!),
        }
      : {}),
    backfill: {
      state: s.backfill_status ?? 'pending',
      source: s.backfill_source ?? defaultSource,
      ...(s.backfill_status === 'failed' && s.backfill_error ? { error: s.backfill_error } : {}),
    },
  }
}

/** `GET /2/conversations`: what the app's `conversation_id:` rules follow (docs/api.md §5). */
export function registerConversationList(app: FastifyInstance, ctx: ServerContext): void {
  // The primary: rules and backfill states are read back as soon as they change.
  const { db, pageTokens } = ctx
  const defaultSource = ctx.options.backfillSource ?? 'recent'
  addRoute(app, ctx, CONVERSATIONS_LIST, async (c) => {
    const limit = c.params.max_results ?? DEFAULT_PAGE
    const scope = `conversations\n${c.client.app_id}`
    const token = c.params.pagination_token
    let after: ListKey | undefined
    if (token !== undefined) {
      const position = pageTokens.decode(scope, token)
      after = position === undefined ? undefined : decodeKey(position)
      if (after === undefined) throw invalidToken('pagination_token', token)
    }

    const rulesOf = new Map<string, string[]>()
    for (const rule of await listAllRules(db, [c.client.app_id])) {
      const id = conversationOfRule(rule.value)
      if (id === undefined) continue
      const ids = rulesOf.get(id)
      if (ids) ids.push(rule.id)
      else rulesOf.set(id, [rule.id])
    }
    if (rulesOf.size === 0) return { body: { meta: { result_count: 0 } } }

    const summaries = await conversationSummaries(db, [...rulesOf.keys()])
    const keyed = summaries.map((s) => {
      const ruleIds = rulesOf.get(s.id)!.sort(compareIds)
      const stored = s.post_count > 0 && s.last_created_at !== null
      const rank = stored ? String(s.last_created_at!.getTime()) : ruleIds[ruleIds.length - 1]!
      return { key: { stored, rank, id: s.id }, s, ruleIds }
    })
    keyed.sort((a, b) => compareKeys(a.key, b.key))
    const rest = after ? keyed.filter((k) => compareKeys(k.key, after) > 0) : keyed
    const page = rest.slice(0, limit)
    if (page.length === 0) return { body: { meta: { result_count: 0 } } }
    const meta: Record<string, unknown> = { result_count: page.length }
    if (rest.length > limit) meta.next_token = pageTokens.encode(scope, encodeKey(page.at(-1)!.key))
    return {
      body: { data: page.map((k) => summaryWire(k.s, k.ruleIds, defaultSource)), meta },
    }
  })
}
