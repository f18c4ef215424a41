import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import {
  conversationVersion,
  listAllRules,
  readConversationSkeleton,
  type Db,
} from '@threadline/db'
import {
  conversationMetrics,
  growthBucketCount,
  MAX_GROWTH_BUCKETS,
  METRICS_CSV_HEADER,
  METRICS_GRANULARITIES,
  metricsCsvRow,
  notFound,
  type ConversationMetrics,
  type MetricsGranularity,
} from '@threadline/domain'
import { invalidRequest } from '../errors.js'
import type { EndpointParams } from '../params.js'
import { addRoute, type Endpoint } from '../routes/route.js'
import type { ServerContext } from '../types.js'
import { conversationOfRule } from './list.js'

export const CONVERSATION_METRICS_PARAMS = {
  conversation_id: {
    kind: 'id',
    required: true,
    description: 'The id of the Post that started the conversation',
  },
  granularity: {
    kind: 'enum',
    values: METRICS_GRANULARITIES,
    description: 'Adds `growth`, new Posts per bucket from the root to the last Post',
  },
} as const satisfies EndpointParams

export const CONVERSATION_METRICS = {
  method: 'GET',
  url: '/2/conversations/:conversation_id/metrics',
  name: 'conversation-metrics',
  group: 'lookup',
  params: CONVERSATION_METRICS_PARAMS,
  summary: 'What a conversation measures: size, depth, breadth, structural virality, timing',
} as const satisfies Endpoint<typeof CONVERSATION_METRICS_PARAMS>

export const CONVERSATIONS_METRICS_TABLE_PARAMS = {
  format: { kind: 'enum', values: ['csv'], description: 'File format (csv)' },
} as const satisfies EndpointParams

export const CONVERSATIONS_METRICS_TABLE = {
  method: 'GET',
  url: '/2/conversations/metrics',
  name: 'conversations-metrics',
  group: 'lookup',
  params: CONVERSATIONS_METRICS_TABLE_PARAMS,
  summary: "One row of metrics per conversation the app's rules follow",
} as const satisfies Endpoint<typeof CONVERSATIONS_METRICS_TABLE_PARAMS>

/**
 * Conversations whose metrics are held; each entry is a few hundred bytes (its growth aside), so
 * this bounds the cache near a megabyte. Target: metrics of an unchanged conversation in < 5 ms
 * (one version read by primary key), whatever its size.
 */
const HELD = 1_000

/** Metrics held by conversation id, for the version they were computed at (least recent out). */
export function createMetricsCache(size = HELD) {
  const held = new Map<
    string,
    { version: string; granularity: string; metrics: ConversationMetrics | undefined }
  >()
  const key = (id: string, granularity?: MetricsGranularity) => `${id}/${granularity ?? ''}`
  return {
    /** The metrics at the conversation's current version: held, or computed from its skeleton. */
    async get(
      db: Db,
      id: string,
      granularity?: MetricsGranularity,
    ): Promise<ConversationMetrics | undefined> {
      const k = key(id, granularity)
      const entry = held.get(k)
      if (entry && entry.version === (await conversationVersion(db, id))) {
        held.delete(k)
        held.set(k, entry)
        return entry.metrics
      }
      const skeleton = await readConversationSkeleton(db, id)
      const { rows } = skeleton
      if (granularity && rows.ids.length > 0) {
        const root = rows.ids.indexOf(id)
        let from = Infinity
        if (root >= 0) from = rows.createdMs[root]!
        else for (let r = 0; r < rows.ids.length; r++) from = Math.min(from, rows.createdMs[r]!)
        if (growthBucketCount(rows.createdMs, from, granularity) > MAX_GROWTH_BUCKETS) {
          throw invalidRequest(
            'granularity',
            [granularity],
            `The conversation spans more than ${MAX_GROWTH_BUCKETS} buckets of a ${granularity}: ask for a coarser \`granularity\``,
          )
        }
      }
      const metrics = conversationMetrics(id, rows, skeleton.reportedReplyCount, granularity)
      held.delete(k)
      held.set(k, { version: skeleton.version, granularity: granularity ?? '', metrics })
      if (held.size > size) held.delete(held.keys().next().value!)
      return metrics
    },
  }
}

export type MetricsCache = ReturnType<typeof createMetricsCache>

/** The conversations an app's `conversation_id:` rules follow, in id order. */
export async function followedConversations(db: Db, appIds?: readonly string[]) {
  const ids = new Set<string>()
  for (const rule of await listAllRules(db, appIds)) {
    const id = conversationOfRule(rule.value)
    if (id !== undefined) ids.add(id)
  }
  return [...ids].sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0))
}

/** The metrics table (CSV, a row per conversation), written a row at a time. */
export async function* metricsTable(
  db: Db,
  cache: MetricsCache,
  conversationIds: readonly string[],
): AsyncIterable<string> {
  yield METRICS_CSV_HEADER
  for (const id of conversationIds) yield metricsCsvRow(id, await cache.get(db, id))
}

/** `GET /2/conversations/:id/metrics` and the app's table (docs/api.md §5.5). */
export function registerConversationMetrics(app: FastifyInstance, ctx: ServerContext): void {
  const cache = createMetricsCache()
  addRoute(app, ctx, CONVERSATION_METRICS, async (c) => {
    const id = c.params.conversation_id
    const metrics = await cache.get(ctx.readDb, id, c.params.granularity)
    if (!metrics) return { body: { errors: [notFound('tweet', 'conversation_id', id)] } }
    return { body: { data: { conversation_id: id, ...metrics } } }
  })

  addRoute(app, ctx, CONVERSATIONS_METRICS_TABLE, async (c) => {
    // The rules from the primary, as the list of conversations reads them.
    const ids = await followedConversations(ctx.db, [c.client.app_id])
    c.reply
      .type('text/csv; charset=utf-8')
      .header('content-disposition', 'attachment; filename="conversation-metrics.csv"')
      .send(Readable.from(metricsTable(ctx.readDb, cache, ids), { objectMode: false }))
    return undefined
  })
}
